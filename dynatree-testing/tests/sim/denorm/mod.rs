//! Propagation of denormalized fields (copies of a source's fields in the objects below it),
//! inline and from the stream, racing renames, deletes, moves and transactions.

mod deletes_and_transactions;
mod renames;
mod target_writes;
