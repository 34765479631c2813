//! What an intent record says: the operation it finishes and the phase it has reached, as
//! stored in the record's `op` and `phase` attributes.

use std::fmt;

use serde::{Serialize, Serializer};

macro_rules! stored_names {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $stored:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// The name stored in the intent record (and shown by the command line).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $stored,)+
                }
            }

            /// The value of a stored name; `None` for a name this version does not know.
            pub(crate) fn parse(s: &str) -> Option<Self> {
                match s {
                    $($stored => Some(Self::$variant),)+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }
    };
}

stored_names! {
    /// The operation an intent record finishes.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::ops::Operation;
    ///
    /// assert_eq!(Operation::Move.to_string(), "move");
    /// assert_eq!(Operation::Reparent, "reparent");
    /// ```
    Operation {
        /// [`Tree::move_subtree`](crate::Tree::move_subtree).
        Move = "move",
        /// [`Tree::copy_subtree`](crate::Tree::copy_subtree).
        Copy = "copy",
        /// [`Tree::delete_subtree`](crate::Tree::delete_subtree).
        Delete = "delete",
        /// [`Tree::delete_node`](crate::Tree::delete_node) with
        /// [`OnChildren::Reparent`](crate::ops::OnChildren::Reparent).
        Reparent = "reparent",
        /// A change of a source of denormalized fields whose copies are not all written yet
        /// (see [`Denormalized`](crate::denorm::Denormalized)).
        Propagate = "propagate",
    }
}

stored_names! {
    /// How far a recorded operation has come.
    ///
    /// # Examples
    ///
    /// ```
    /// use dynatree::ops::Phase;
    ///
    /// assert_eq!(Phase::Unlock.as_str(), "unlock");
    /// ```
    Phase {
        /// Walking and locking the source (then holding its objects).
        Lock = "lock",
        /// Writing the destination.
        Copy = "copy",
        /// Moving a re-parented node's children up, one recorded move each.
        Move = "move",
        /// Removing the source.
        Delete = "delete",
        /// Releasing the holds on objects, then the locks on listing rows.
        Unlock = "unlock",
        /// Refused: undoing what was written.
        Rollback = "rollback",
        /// Bringing denormalized copies up to their source.
        Propagate = "propagate",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_names_round_trip() {
        for op in [
            Operation::Move,
            Operation::Copy,
            Operation::Delete,
            Operation::Reparent,
            Operation::Propagate,
        ] {
            assert_eq!(Operation::parse(op.as_str()), Some(op));
        }
        for phase in [
            Phase::Lock,
            Phase::Copy,
            Phase::Move,
            Phase::Delete,
            Phase::Unlock,
            Phase::Rollback,
            Phase::Propagate,
        ] {
            assert_eq!(Phase::parse(phase.as_str()), Some(phase));
        }
        assert_eq!(Phase::parse("later"), None);
    }
}
