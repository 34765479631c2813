//! The multi-request protocols (moves, copies, subtree deletions, re-parenting, link rewrites,
//! lease takeover, the path index) under schedules and faults aimed at their edges.

mod helping_rewrites;
mod joins_and_go_writes;
mod limits_and_takeovers;
