//! Merging the providers' results: when spans overlap, the highest confidence wins, then the
//! longest span, then the earliest; the output is sorted by start offset.

use mnemo_ner_api::{EntityType, ExtractedEntity};

fn overlaps(a: &ExtractedEntity, b: &ExtractedEntity) -> bool {
    a.start < b.end && b.start < a.end
}

/// Keeps the best of every group of overlapping entities, in text order.
///
/// A winning person without a relation takes the relation of an overlapping person that lost
/// (the pattern provider read `my wife Sarah`, the model only `Sarah`). Empty spans are dropped.
pub(crate) fn merge(mut candidates: Vec<ExtractedEntity>) -> Vec<ExtractedEntity> {
    candidates.retain(|entity| entity.start < entity.end);
    candidates.sort_by(|a, b| {
        b.confidence
            .total_cmp(&a.confidence)
            .then_with(|| (b.end - b.start).cmp(&(a.end - a.start)))
            .then_with(|| a.start.cmp(&b.start))
    });
    let mut kept: Vec<ExtractedEntity> = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        if let Some(winner) = kept.iter_mut().find(|kept| overlaps(kept, &candidate)) {
            if winner.relation.is_none()
                && winner.entity_type == EntityType::Person
                && candidate.entity_type == EntityType::Person
            {
                winner.relation = candidate.relation;
            }
            continue;
        }
        kept.push(candidate);
    }
    kept.sort_by_key(|entity| (entity.start, entity.end));
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(start: usize, end: usize, confidence: f32, provider: &str) -> ExtractedEntity {
        ExtractedEntity {
            surface: "x".repeat(end - start),
            canonical: String::new(),
            entity_type: EntityType::Person,
            start,
            end,
            confidence,
            relation: None,
            provider: provider.to_owned(),
        }
    }

    fn providers(entities: &[ExtractedEntity]) -> Vec<&str> {
        entities.iter().map(|e| e.provider.as_str()).collect()
    }

    #[test]
    fn highest_confidence_wins_an_overlap() {
        let merged = merge(vec![entity(0, 10, 0.7, "long"), entity(2, 5, 0.9, "sure")]);
        assert_eq!(providers(&merged), vec!["sure"]);
    }

    #[test]
    fn then_the_longest_span() {
        let merged = merge(vec![entity(0, 5, 0.8, "short"), entity(0, 9, 0.8, "long")]);
        assert_eq!(providers(&merged), vec!["long"]);
    }

    #[test]
    fn disjoint_spans_all_stay_sorted_by_start() {
        let merged = merge(vec![
            entity(20, 25, 0.5, "c"),
            entity(0, 4, 0.9, "a"),
            entity(4, 8, 0.6, "b"),
            entity(3, 3, 1.0, "empty"),
        ]);
        assert_eq!(providers(&merged), vec!["a", "b", "c"]);
    }

    #[test]
    fn a_chain_keeps_winners_that_do_not_overlap_each_other() {
        // b overlaps a and c; a and c win, b goes.
        let merged = merge(vec![
            entity(0, 5, 0.9, "a"),
            entity(4, 12, 0.8, "b"),
            entity(10, 15, 0.95, "c"),
        ]);
        assert_eq!(providers(&merged), vec!["a", "c"]);
    }

    #[test]
    fn a_winning_person_takes_a_losing_persons_relation() {
        let mut pattern = entity(8, 13, 0.7, "pattern");
        pattern.relation = Some("wife".to_owned());
        let merged = merge(vec![pattern, entity(8, 13, 0.8, "llm")]);
        assert_eq!(providers(&merged), vec!["llm"]);
        assert_eq!(merged[0].relation.as_deref(), Some("wife"));
    }
}
