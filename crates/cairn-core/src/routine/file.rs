//! Reading routine specs from YAML or JSON text, with line and column on errors.

use std::fmt;

use super::RoutineSpec;

/// The format of a routine file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecFormat {
    /// YAML (`.yaml`, `.yml`).
    Yaml,
    /// JSON (`.json`).
    Json,
}

impl SpecFormat {
    /// Picks the format from a file name's extension; YAML unless it ends in `.json`.
    pub fn from_file_name(name: &str) -> SpecFormat {
        if name.to_ascii_lowercase().ends_with(".json") {
            SpecFormat::Json
        } else {
            SpecFormat::Yaml
        }
    }
}

/// A routine file that could not be read as a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutineFileError {
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong (names the field or token).
    pub message: String,
}

impl fmt::Display for RoutineFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "line {l}, column {c}: {}", self.message),
            (Some(l), None) => write!(f, "line {l}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for RoutineFileError {}

impl RoutineSpec {
    /// Parses a spec from text in the given format (shape only; call `validate` next).
    pub fn parse(text: &str, format: SpecFormat) -> Result<RoutineSpec, RoutineFileError> {
        match format {
            SpecFormat::Yaml => serde_norway::from_str(text).map_err(|e| {
                let loc = e.location();
                RoutineFileError {
                    line: loc.as_ref().map(|l| l.line()),
                    column: loc.as_ref().map(|l| l.column()),
                    message: strip_location(&e.to_string()),
                }
            }),
            SpecFormat::Json => serde_json::from_str(text).map_err(|e| RoutineFileError {
                line: Some(e.line()),
                column: Some(e.column()),
                message: strip_location(&e.to_string()),
            }),
        }
    }

    /// The spec as YAML text.
    pub fn to_yaml(&self) -> Result<String, RoutineFileError> {
        serde_norway::to_string(self).map_err(|e| RoutineFileError {
            line: None,
            column: None,
            message: e.to_string(),
        })
    }
}

/// Both parsers append " at line X column Y"; we report the position separately.
pub(super) fn strip_location(message: &str) -> String {
    match message.find(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}
