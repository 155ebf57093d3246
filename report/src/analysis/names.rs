//! Enums written to the report as fixed strings (verdicts, finding kinds).

/// An enum whose variants are written as the given strings, with
/// `Other(String)` for a string this version does not know: a report
/// written by another version (or a consumer's own JSON) may carry a name
/// this one does not have, and reading it must not fail. Gives `as_str`,
/// `ALL` (the known variants, in order), `Display`, serde's `Serialize`
/// and `Deserialize` as the strings, and comparison with `&str` both ways.
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A name this version does not know (a report of another
            /// version): kept as written, so reading it does not fail and
            /// writing it again gives the same string.
            Other(String),
        }

        impl $name {
            /// The known values, in the order they are declared.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The value as the report writes it.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $text, )*
                    $name::Other(s) => s,
                }
            }

            /// The value written as `s` (`Other` for a string this version
            /// does not know).
            pub fn from_name(s: &str) -> Self {
                match s {
                    $( $text => $name::$variant, )*
                    _ => $name::Other(s.to_string()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.as_str()
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.as_str()
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Ok($name::from_name(&s))
            }
        }
    };
}
