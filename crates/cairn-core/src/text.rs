//! Small text helpers shared by the parsers that suggest what was meant.

/// Levenshtein distance over chars, for "did you mean" hints on short names
/// (config keys, commands, tool names); O(n·m), which is nothing at that size.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("shell", "shell"), 0);
        assert_eq!(edit_distance("shel", "shell"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("file_raed", "file_read"), 2);
        assert_eq!(edit_distance("é", "e"), 1);
    }
}
