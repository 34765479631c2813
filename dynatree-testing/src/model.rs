//! x
pub fn run_fake(_: u32) {} pub fn run_local(_: &str, _: u32) {}
