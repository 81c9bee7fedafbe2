//! Many small rows read as one. sqlx hands each row from the connection's worker thread to the
//! reading task through a channel and wakes the task for it: about 6 µs a row on this machine,
//! more than SQLite's own work for a keyed lookup, and a hybrid search read several hundred
//! rows of keys. The search path's queries that return the most rows (rank keys, the full-text
//! list, an entity's newest links) therefore select them packed into one JSON array
//! (`json_group_array`), read one row, and unpack it here.
//!
//! SQLite's JSON writes a REAL with 15 significant digits, which does not always read back as
//! the same `f64`; such a column is packed as text of 17 digits ([`exact_real`], read back by
//! [`Real`]). The values packed here (confidences, BM25 scores) read back exactly on x86-64;
//! SQLite's own conversion can miss the last digit of extreme exponents where the platform has
//! no extended `long double`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use sqlx::{QueryBuilder, Sqlite, SqlitePool};

use crate::error::{MemoryError, Result};

/// The SQL aggregate that packs each row's `columns` (a comma-separated list of expressions) as
/// a JSON array into one JSON array, in the order `order_by` (an SQL `ORDER BY` list) gives, or
/// in any order when it is empty.
pub(super) fn packed_rows(columns: &str, order_by: &str) -> String {
    if order_by.is_empty() {
        format!("json_group_array(json_array({columns}))")
    } else {
        format!("json_group_array(json_array({columns}) ORDER BY {order_by})")
    }
}

/// The SQL expression that packs the REAL `expression` as text that reads back exactly. Only
/// for a column that is never NULL: `printf` writes NULL as `0.0`.
pub(super) fn exact_real(expression: &str) -> String {
    format!("printf('%!.17g', {expression})")
}

/// Runs `builder`, a query that selects one [`packed_rows`] column, and unpacks its rows.
///
/// # Errors
/// The database fails, or a packed row does not have `T`'s shape (a bug in the query).
pub(super) async fn fetch_packed<T: DeserializeOwned>(
    mut builder: QueryBuilder<Sqlite>,
    pool: &SqlitePool,
) -> Result<Vec<T>> {
    let packed: String = builder.build_query_scalar().fetch_one(pool).await?;
    // A row of the wrong shape is the query's fault, not the stored data's: a decoding error.
    serde_json::from_str(&packed)
        .map_err(|error| MemoryError::Database(sqlx::Error::Decode(Box::new(error))))
}

/// A REAL packed by [`exact_real`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Real(pub(super) f64);

impl<'de> Deserialize<'de> for Real {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        // `printf` writes no character JSON escapes, so the text is borrowed.
        let text = <&'de str>::deserialize(deserializer)?;
        text.parse()
            .map(Real)
            .map_err(|_| serde::de::Error::custom(format!("`{text}` is not a number")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn memory_pool() -> SqlitePool {
        SqlitePool::connect("sqlite::memory:").await.unwrap()
    }

    #[tokio::test]
    async fn packed_rows_come_back_in_order_with_exact_reals() {
        let pool = memory_pool().await;
        // VALUES names its columns column1, column2, ...
        let query = format!(
            "SELECT {} FROM (SELECT column1 AS id, column2 AS score, column3 AS rank, \
             column4 AS note FROM (VALUES ('a', 0.1 + 0.2, 3, NULL), ('b', 1.0 / 3, 1, 'x'), \
             ('c', 5e-324, 2, 'say \"hi\" ' || char(10) || 'à 東京')))",
            packed_rows(&format!("id, {}, rank, note", exact_real("score")), "rank"),
        );
        let rows: Vec<(String, Real, i64, Option<String>)> =
            fetch_packed(QueryBuilder::new(query), &pool).await.unwrap();
        let expected = [
            ("b", 1.0 / 3.0, 1, Some("x")),
            // The smallest subnormal, and text with a quote, a line break and more than ASCII.
            ("c", 5e-324, 2, Some("say \"hi\" \nà 東京")),
            ("a", 0.1 + 0.2, 3, None),
        ];
        assert_eq!(rows.len(), expected.len());
        for (row, (id, score, rank, note)) in rows.iter().zip(expected) {
            assert_eq!(row.0, id);
            // Bit for bit: 15 digits would read 0.1 + 0.2 back as 0.3.
            assert_eq!(row.1 .0.to_bits(), f64::to_bits(score), "{id}");
            assert_eq!(row.2, rank);
            assert_eq!(row.3.as_deref(), note);
        }
    }

    #[tokio::test]
    async fn no_rows_pack_as_an_empty_list_and_a_wrong_shape_is_an_error() {
        let pool = memory_pool().await;
        let none = format!(
            "SELECT {} FROM (SELECT 1 AS x WHERE 0)",
            packed_rows("x", "")
        );
        let rows: Vec<(i64,)> = fetch_packed(QueryBuilder::new(none), &pool).await.unwrap();
        assert!(rows.is_empty());
        let text = format!("SELECT {} FROM (SELECT 'word' AS x)", packed_rows("x", ""));
        let wrong = fetch_packed::<(i64,)>(QueryBuilder::new(text), &pool).await;
        assert!(
            matches!(&wrong, Err(MemoryError::Database(sqlx::Error::Decode(_)))),
            "{wrong:?}"
        );
        assert!(serde_json::from_str::<Real>("\"1.5e3\"").unwrap().0 == 1500.0);
        assert!(serde_json::from_str::<Real>("\"many\"").is_err());
    }
}
