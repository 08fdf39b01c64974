//! Reciprocal Rank Fusion of a text ranking and a vector ranking.
//!
//! An item at 1-based rank `r` on a side with weight `w` earns `w / (k + r)`; an item's
//! score is the sum over the sides that found it. Ties are broken deterministically: the
//! higher score first, then the better (smaller) best rank, then the smaller id.

/// The RRF constant from Cormack et al. (2009); damps the weight of the top ranks.
pub(super) const RRF_K: f64 = 60.0;

/// Per-side weights of hybrid search's Reciprocal Rank Fusion: a result at rank `r` on
/// a side of weight `w` earns `w / (60 + r)`, summed over the sides that found it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// The full-text side.
    pub text: f64,
    /// The vector side.
    pub vector: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            text: 1.0,
            vector: 1.0,
        }
    }
}

/// Which side of a hybrid search found a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, crate::ToolSchema)]
#[serde(rename_all = "lowercase")]
pub enum FoundBy {
    /// Только полнотекстовый индекс (по словам)
    #[schema(description_en = "Only the full-text index (by words)")]
    Text,
    /// Только векторный индекс (по смыслу)
    #[schema(description_en = "Only the vector index (by meaning)")]
    Vector,
    /// Оба
    #[schema(description_en = "Both")]
    Both,
}

/// One fused result.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fused<T> {
    /// The item's id.
    pub(super) id: T,
    /// The RRF score.
    pub(super) score: f64,
    /// Which sides found it.
    pub(super) found_by: FoundBy,
}

/// Fuses two rankings (best first, ids unique within a side) with RRF constant `k`.
pub(super) fn rrf<T: Ord + Copy>(
    text: &[T],
    vector: &[T],
    weights: Weights,
    k: f64,
) -> Vec<Fused<T>> {
    // id -> (score, best rank, in text, in vector)
    let mut acc: std::collections::BTreeMap<T, (f64, usize, bool, bool)> =
        std::collections::BTreeMap::new();
    for (i, id) in text.iter().enumerate() {
        let e = acc.entry(*id).or_insert((0.0, usize::MAX, false, false));
        e.0 += weights.text / (k + (i + 1) as f64);
        e.1 = e.1.min(i + 1);
        e.2 = true;
    }
    for (i, id) in vector.iter().enumerate() {
        let e = acc.entry(*id).or_insert((0.0, usize::MAX, false, false));
        e.0 += weights.vector / (k + (i + 1) as f64);
        e.1 = e.1.min(i + 1);
        e.3 = true;
    }
    let mut out: Vec<(Fused<T>, usize)> = acc
        .into_iter()
        .map(|(id, (score, best, t, v))| {
            let found_by = match (t, v) {
                (true, true) => FoundBy::Both,
                (true, false) => FoundBy::Text,
                _ => FoundBy::Vector,
            };
            (
                Fused {
                    id,
                    score,
                    found_by,
                },
                best,
            )
        })
        .collect();
    out.sort_by(|(a, ar), (b, br)| {
        b.score
            .total_cmp(&a.score)
            .then(ar.cmp(br))
            .then(a.id.cmp(&b.id))
    });
    out.into_iter().map(|(f, _)| f).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn hand_computed_scores() {
        // text: 1, 2, 3; vector: 3, 4.
        let f = rrf(&[1, 2, 3], &[3, 4], Weights::default(), RRF_K);
        let ids: Vec<i32> = f.iter().map(|x| x.id).collect();
        // 3: 1/63 + 1/61 = 0.032266..; 1: 1/61 = 0.016393..; 4: 1/62; 2: 1/62.
        // 4 and 2 tie on score and best rank 2: the smaller id first.
        assert_eq!(ids, vec![3, 1, 2, 4]);
        assert!(close(f[0].score, 1.0 / 63.0 + 1.0 / 61.0));
        assert_eq!(f[0].found_by, FoundBy::Both);
        assert!(close(f[1].score, 1.0 / 61.0));
        assert_eq!(f[1].found_by, FoundBy::Text);
        assert!(close(f[2].score, 1.0 / 62.0));
        assert!(close(f[3].score, 1.0 / 62.0));
        assert_eq!(f[3].found_by, FoundBy::Vector);
    }

    #[test]
    fn weights_shift_the_order() {
        let w = Weights {
            text: 1.0,
            vector: 2.0,
        };
        let f = rrf(&[1], &[2], w, RRF_K);
        assert_eq!(f[0].id, 2);
        assert!(close(f[0].score, 2.0 / 61.0));
        assert!(close(f[1].score, 1.0 / 61.0));
    }

    #[test]
    fn equal_score_prefers_better_best_rank() {
        // a: rank 1 text (w 1) => 1/61. b: rank 2 on both with weights chosen to tie? Use k=0:
        // a at text rank 1: 1/1 = 1. b at text rank 2 + vector rank 2: 1/2 + 1/2 = 1.
        let f = rrf(&[10, 5], &[7, 5], Weights::default(), 0.0);
        // 10: 1, 7: 1, 5: 1; 10 and 7 have best rank 1, 5 has 2; then by id: 7, 10.
        let ids: Vec<i32> = f.iter().map(|x| x.id).collect();
        assert_eq!(ids, vec![7, 10, 5]);
    }

    #[test]
    fn empty_sides() {
        assert!(rrf::<i64>(&[], &[], Weights::default(), RRF_K).is_empty());
        let f = rrf(&[], &[9], Weights::default(), RRF_K);
        assert_eq!(f[0].found_by, FoundBy::Vector);
    }
}
