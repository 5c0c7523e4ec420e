//! Ranking for hybrid recall: cosine similarity over unit vectors, and the
//! merge of keyword and vector hits into one candidate per document.

use std::collections::HashMap;

use cairn_store::{KeywordHit, MemoryDoc};
use uuid::Uuid;

/// A document on its way to being a hit: what each side said of it.
pub(super) struct Candidate {
    pub(super) id: Uuid,
    /// Known when the keyword side found it; vector-only ones are read after ranking.
    pub(super) doc: Option<MemoryDoc>,
    pub(super) keyword: Option<f64>,
    pub(super) vector: Option<f64>,
    pub(super) score: f64,
}

/// `v` scaled to unit length (a zero vector stays zero).
pub fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// The `k` stored vectors most similar to `query` (unit vectors: the dot
/// product is the cosine), with positive similarity, best first.
pub fn top_similar(query: &[f32], stored: &[(Uuid, Vec<f32>)], k: usize) -> Vec<(Uuid, f64)> {
    let mut scores: Vec<(Uuid, f64)> = stored
        .iter()
        .filter(|(_, v)| v.len() == query.len())
        .map(|(id, v)| {
            let dot: f32 = v.iter().zip(query).map(|(a, b)| a * b).sum();
            (*id, f64::from(dot))
        })
        .filter(|(_, s)| *s > 0.0)
        .collect();
    // Partition first: only the k best need sorting, not every document.
    if scores.len() > k && k > 0 {
        scores.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
        scores.truncate(k);
    }
    scores.sort_by(|a, b| b.1.total_cmp(&a.1));
    scores.truncate(k);
    scores
}

/// The keyword and vector hits, one candidate per document, unscored.
pub(super) fn merge(
    keyword: Vec<KeywordHit>,
    vectors: Vec<(Uuid, f64)>,
) -> HashMap<Uuid, Candidate> {
    let mut merged: HashMap<Uuid, Candidate> = HashMap::new();
    for hit in keyword {
        merged.insert(
            hit.doc.id,
            Candidate {
                id: hit.doc.id,
                doc: Some(hit.doc),
                keyword: Some(hit.score),
                vector: None,
                score: 0.0,
            },
        );
    }
    for (id, similarity) in vectors {
        merged
            .entry(id)
            .or_insert(Candidate {
                id,
                doc: None,
                keyword: None,
                vector: None,
                score: 0.0,
            })
            .vector = Some(similarity);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_similar_ranks_by_cosine_and_skips_other_sizes() {
        let a = Uuid::from_u128(1);
        let b = Uuid::from_u128(2);
        let c = Uuid::from_u128(3);
        let stored = vec![
            (a, normalized(vec![1.0, 1.0])),
            (b, vec![1.0, 0.0]),
            (c, vec![1.0, 0.0, 0.0]),
        ];
        let top = top_similar(&[1.0, 0.0], &stored, 5);
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![b, a]);
        assert!((top[1].1 - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert!(top_similar(&[-1.0, 0.0], &stored, 5).is_empty());
        let many: Vec<(Uuid, Vec<f32>)> = (1..=100u8)
            .map(|i| {
                (
                    Uuid::from_u128(u128::from(i)),
                    normalized(vec![f32::from(i), 50.0]),
                )
            })
            .collect();
        let best: Vec<Uuid> = top_similar(&[1.0, 0.0], &many, 3)
            .into_iter()
            .map(|t| t.0)
            .collect();
        assert_eq!(best, [100u128, 99, 98].map(Uuid::from_u128));
    }
}
