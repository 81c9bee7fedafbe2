//! `mnemo bench`'s report as text: one line per measurement, read from the JSON report.

use serde_json::Value;

/// Prints `report` (the JSON `mnemo bench --json` prints) as text; `postgres` when the store
/// was PostgreSQL.
pub(super) fn print(report: &Value, postgres: bool) {
    let get = |path: &[&str]| {
        path.iter()
            .fold(report, |value, key| &value[*key])
            .as_f64()
            .unwrap_or_default()
    };
    // "p50 1.23 ms  p95 … ms  p99 … ms" of the latencies at `path`.
    let percentiles = |path: &[&str], decimals: usize| {
        ["p50", "p95", "p99"]
            .map(|key| {
                let at: Vec<&str> = path.iter().copied().chain([key]).collect();
                format!("{key} {:.*} ms", decimals, get(&at))
            })
            .join("  ")
    };
    println!(
        "{} memories ({} users, {} real embeddings), {}: database {:.1} MB, peak RSS {:.0} MB",
        report["memories"],
        report["users"],
        report["real_embeddings"],
        report["backend"].as_str().unwrap_or_default(),
        get(&["db_bytes"]) / 1e6,
        get(&["rss_bytes"]) / 1e6
    );
    if report["timed_ingests"].as_u64() == Some(0) {
        println!("  ingest            not measured (--reuse)");
    } else {
        println!(
            "  ingest            {}  ({:.0}/s)",
            percentiles(&["ingest_ms"], 2),
            get(&["ingest_per_second"])
        );
    }
    if report["screening_ms"]["p99"].as_f64().unwrap_or_default() > 0.0 {
        println!(
            "  screening         {}  (the poisoning screen on each turn)",
            percentiles(&["screening_ms"], 3)
        );
    }
    println!(
        "  hybrid search     {}  (median of {} rounds x {} queries, query embedding included)",
        percentiles(&["search_ms"], 2),
        report["rounds"],
        report["queries_per_round"]
    );
    println!(
        "  without embedding {}",
        percentiles(&["search_ms_without_embedding"], 2)
    );
    println!(
        "  first person      {}  (one round, sentence keys read)",
        percentiles(&["first_person_search_ms"], 2)
    );
    println!(
        "  single lists p50  fts {:.2} ms, vector {:.2} ms, entity {:.2} ms",
        get(&["single_list_p50_ms", "fts"]),
        get(&["single_list_p50_ms", "vector"]),
        get(&["single_list_p50_ms", "entity"])
    );
    println!(
        "  vector stage      recall vs exact @10 {:.3} @50 {:.3}; quantised p50 {:.2} ms, exact p50 {:.2} ms; mirror {:.1} MB ({} memory rows, {} sentence rows), loaded in {:.0} ms",
        get(&["vector_stage", "recall@10_vs_exact"]),
        get(&["vector_stage", "recall@50_vs_exact"]),
        get(&["vector_stage", "quantized_ms", "p50"]),
        get(&["vector_stage", "exact_ms", "p50"]),
        get(&["vector_stage", "mirror_bytes"]) / 1e6,
        get(&["vector_stage", "mirror_rows"]),
        get(&["vector_stage", "sentence_rows"]),
        get(&["vector_stage", "mirror_load_ms"])
    );
    let tokens = match report["embedding"]["tokens_per_s"].as_f64() {
        Some(per_s) => format!(
            "{per_s:.0} tokens/s on texts of {} tokens",
            report["embedding"]["long_text_tokens"]
        ),
        None => "tokens/s not known (the embedder cannot count its tokens)".to_owned(),
    };
    println!(
        "  embedding         {:.0} sentences/s in batches of 64; {tokens}",
        get(&["embedding", "sentences_per_s"])
    );
    let users = report["users"].as_u64().unwrap_or(1);
    if users > 1 && postgres {
        println!(
            "  one owner         not compared on PostgreSQL: bench a fresh database with the owner's share of memories (--memories {} --users 1)",
            report["memories"].as_u64().unwrap_or_default() / users
        );
    }
    if report["forget"]["forgets"].as_u64().unwrap_or_default() > 0 {
        println!(
            "  forget            {}  ({} forgets; per forget {:.2} memories removed, {:.2} changed, {:.2} entities removed)",
            percentiles(&["forget", "forget_ms"], 2),
            report["forget"]["forgets"],
            get(&["forget", "removed_per_forget"]),
            get(&["forget", "changed_per_forget"]),
            get(&["forget", "entities_removed_per_forget"]),
        );
    }
    if report["owner_alone"].is_object() {
        println!(
            "  one owner         {} of {} memories: hybrid p50 {:.2} ms here, {:.2} ms in a store of their own ({:.2}x; {} searches, interleaved)",
            report["owner_alone"]["owner"],
            report["owner_alone"]["owner_memories"],
            get(&["owner_alone", "in_shared_store_ms", "p50"]),
            get(&["owner_alone", "alone_ms", "p50"]),
            get(&["owner_alone", "p50_ratio"]),
            report["owner_alone"]["searches"],
        );
    }
}
