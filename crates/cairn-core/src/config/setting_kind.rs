//! What a setting holds: the type of its value and where its default comes from.

/// The type of a setting's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `true`/`false` (env: true/false, 1/0, yes/no, on/off).
    Bool,
    /// A non-negative integer.
    UInt,
    /// Free text.
    Text,
    /// An IANA time zone name, checked against the tz database.
    Zone,
    /// A list of strings (env: comma-separated).
    List,
}

impl Kind {
    /// How the kind is named in error messages ("expected an integer").
    pub fn expected(self) -> &'static str {
        match self {
            Kind::Bool => "true or false",
            Kind::UInt => "a non-negative integer",
            Kind::Text => "a string",
            Kind::Zone => "an IANA time zone name such as \"Europe/Paris\"",
            Kind::List => "a list of strings",
        }
    }
}

/// Where a default comes from when neither file nor environment sets a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultValue {
    /// No value: the setting is optional.
    Unset,
    /// A fixed boolean.
    Bool(bool),
    /// A fixed integer.
    UInt(u64),
    /// A fixed string.
    Text(&'static str),
    /// A path under `$CAIRN_HOME` (the suffix is joined to the home directory).
    UnderHome(&'static str),
    /// A SQLite URL for a file under `$CAIRN_HOME`.
    SqliteUnderHome(&'static str),
    /// The time zone of the machine, detected by the caller.
    SystemZone,
    /// A fixed list of strings.
    List(&'static [&'static str]),
}
