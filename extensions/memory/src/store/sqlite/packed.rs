//! Many small rows read as one. sqlx hands each row from the connection's worker thread to the
//! reading task through a channel and wakes the task for it; at 100k memories that hand-over
//! cost about 6 µs a row, more than SQLite's own work for a keyed lookup, and a hybrid search
//! reads several hundred rows of keys. The queries of the search path that return many rows
//! therefore select them packed into one JSON array (`json_group_array`), read one row, and
//! unpack it here.
//!
//! SQLite's JSON writes a REAL with 15 significant digits, which does not always read back as
//! the same `f64`; such a column is packed as text of 17 digits ([`exact_real`], read back by
//! [`Real`]), which does.

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

/// The SQL expression that packs the REAL `expression` as text that reads back exactly.
pub(super) fn exact_real(expression: &str) -> String {
    format!("printf('%!.17g', {expression})")
}

/// Runs `builder`, a query that selects one [`packed_rows`] column, and unpacks its rows.
///
/// # Errors
/// The database fails, or a packed row does not have `T`'s shape (a bug in the query).
pub(super) async fn fetch_packed<T: DeserializeOwned>(
    mut builder: QueryBuilder<'_, Sqlite>,
    pool: &SqlitePool,
) -> Result<Vec<T>> {
    let packed: String = builder.build_query_scalar().fetch_one(pool).await?;
    serde_json::from_str(&packed)
        .map_err(|error| MemoryError::Corrupt(format!("a packed query result: {error}")))
}

/// A REAL packed by [`exact_real`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Real(pub(super) f64);

impl<'de> Deserialize<'de> for Real {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
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
             ('c', -7.123456789012345, 2, 'y')))",
            packed_rows(&format!("id, {}, rank, note", exact_real("score")), "rank"),
        );
        let rows: Vec<(String, Real, i64, Option<String>)> =
            fetch_packed(QueryBuilder::new(query), &pool).await.unwrap();
        let expected = [
            ("b", 1.0 / 3.0, 1, Some("x")),
            ("c", -7.123_456_789_012_345, 2, Some("y")),
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
            matches!(&wrong, Err(MemoryError::Corrupt(message)) if message.contains("packed")),
            "{wrong:?}"
        );
        assert!(serde_json::from_str::<Real>("\"1.5e3\"").unwrap().0 == 1500.0);
        assert!(serde_json::from_str::<Real>("\"many\"").is_err());
    }
}
