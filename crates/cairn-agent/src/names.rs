//! Tool names: the canonical form every name is compared in, and the
//! aliases models commonly use for the built-in tools. A leaf: the
//! registry, the policy gate and the sandbox all judge names this way.

/// Aliases models commonly use for the built-in tools, as (alias, canonical name).
///
/// An alias only resolves when its canonical tool is registered.
pub const DEFAULT_ALIASES: &[(&str, &str)] = &[
    ("bash", "shell"),
    ("sh", "shell"),
    ("exec", "shell"),
    ("run", "shell"),
    ("run_command", "shell"),
    ("execute_command", "shell"),
    ("terminal", "shell"),
    ("fileread", "file_read"),
    ("read_file", "file_read"),
    ("readfile", "file_read"),
    ("cat", "file_read"),
    ("filewrite", "file_write"),
    ("write_file", "file_write"),
    ("writefile", "file_write"),
    ("ls", "list_dir"),
    ("listdir", "list_dir"),
    ("list_directory", "list_dir"),
    ("list_files", "list_dir"),
    ("http", "http_request"),
    ("fetch", "http_request"),
    ("curl", "http_request"),
    ("web_fetch", "http_request"),
    ("httprequest", "http_request"),
];

/// Lower-cases and maps `-`, space and `.` to `_`, so `Read-File` finds `read_file`.
pub fn normalize_name(name: &str) -> String {
    name.trim()
        .chars()
        .map(|c| match c {
            '-' | ' ' | '.' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}
