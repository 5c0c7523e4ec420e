//! Text folding for memory search: one normal form (lower case, accents
//! removed, words split on anything that is not a letter or digit) shared by
//! the store's full-text column, query terms and the fake embeddings, so
//! "Réunion" and "reunion" are the same word on every backend.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// `text` lower-cased with accents removed (NFD, combining marks dropped).
pub fn fold(text: &str) -> String {
    text.nfd()
        .filter(|c| !is_combining_mark(*c))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The folded words of `text`, in order, repeats kept.
pub fn words(text: &str) -> Vec<String> {
    fold(text)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// The searchable form of a document: its folded words joined by spaces.
pub fn search_text(text: &str) -> String {
    words(text).join(" ")
}

/// Words too common to say what a query is about (English and French,
/// already folded). A query made only of these matches nothing.
const STOPWORDS: &[&str] = &[
    "a", "about", "also", "an", "and", "any", "are", "as", "at", "be", "but", "by", "can", "could",
    "do", "does", "did", "for", "just", "should", "some", "would", "from", "has", "have", "he",
    "her", "his", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no", "not", "of",
    "on", "or", "our", "she", "so", "that", "the", "their", "them", "then", "there", "these",
    "they", "this", "to", "up", "us", "was", "we", "were", "what", "when", "where", "which", "who",
    "why", "will", "with", "you", "your", "au", "aux", "avec", "ce", "ces", "dans", "de", "des",
    "du", "elle", "en", "est", "et", "il", "je", "la", "le", "les", "leur", "lui", "ma", "mais",
    "me", "mes", "mon", "ne", "nous", "on", "ou", "par", "pas", "pour", "qu", "que", "qui", "sa",
    "se", "ses", "son", "sur", "ta", "te", "tes", "ton", "tu", "un", "une", "vous", "y",
];

/// The distinct words of a query that carry meaning: folded, stop words and
/// single letters dropped, first occurrence order kept.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in words(query) {
        let meaningful = word.chars().count() > 1 || word.chars().all(|c| c.is_ascii_digit());
        if meaningful && !STOPWORDS.contains(&word.as_str()) && !terms.contains(&word) {
            terms.push(word);
        }
    }
    terms
}

/// The share of `terms` that occur among the words of `search_text` (a
/// document's folded form), in 0..=1: the keyword score of a hit, the same
/// on every backend.
pub fn coverage(terms: &[String], search_text: &str) -> f64 {
    if terms.is_empty() {
        return 0.0;
    }
    let found = terms
        .iter()
        .filter(|t| search_text.split(' ').any(|w| w == t.as_str()))
        .count();
    found as f64 / terms.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accents_and_case_fold_away() {
        assert_eq!(fold("Réunion à l'Élysée"), "reunion a l'elysee");
        assert_eq!(search_text("Réunion, à 10h!"), "reunion a 10h");
        assert_eq!(search_text("naïve façade"), "naive facade");
    }

    #[test]
    fn query_terms_drop_stop_words_and_repeats() {
        assert_eq!(
            query_terms("What is the réunion for? The REUNION, Lyon"),
            ["reunion", "lyon"]
        );
        assert!(query_terms("the of and").is_empty());
        assert_eq!(query_terms("7 x"), ["7"]);
    }

    #[test]
    fn coverage_counts_whole_words() {
        let terms = query_terms("dentist appointment");
        assert_eq!(coverage(&terms, "dentist on monday"), 0.5);
        assert_eq!(coverage(&terms, "dentists"), 0.0);
        assert_eq!(coverage(&terms, "appointment with the dentist"), 1.0);
    }
}
