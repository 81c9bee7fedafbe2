//! Two FTS5 auxiliary functions, written here and registered through SQLite's C API with every
//! connection (the only calls into C in the store besides `open.rs`), for ranking a scope's
//! matches by its own statistics:
//!
//! - `scope_bm25(memories_fts, documents, tokens, df_1, …, df_n)`: FTS5's BM25 (k1 = 1.2,
//!   b = 0.75), negated as `bm25()` is, over the text column alone, with the document count,
//!   total text length and per-phrase document counts given by the caller: those of the asker's
//!   scope, so that other users' words change neither one user's inverse document frequencies
//!   nor their average length. `tokens` below 0 takes the whole index's own figures (the scope
//!   is the whole index). One `df` per phrase of the query, in its order. Should the counts
//!   disagree (FTS5 drops a phrase of no token from an implicit AND; the search layer writes
//!   explicit `AND`/`OR`), every phrase weighs as a word in half the scope would, rather than
//!   take another phrase's weight.
//! - `text_length(memories_fts)`: the row's text length in tokens, for a scope's total.
//!
//! FTS5's built-in `bm25()` reads the whole index's figures, which is right only for a search
//! over the whole store.

use std::ffi::{c_char, c_int, c_void};
use std::ptr;
use std::sync::Once;

use libsqlite3_sys as ffi;

/// BM25's term-frequency saturation.
const K1: f64 = 1.2;
/// BM25's length normalisation.
const B: f64 = 0.75;
/// The text column of `memories_fts`.
const TEXT_COLUMN: c_int = 0;

/// Registers both functions with every connection SQLite opens from now on.
#[allow(unsafe_code)]
pub(super) fn register_scope_rank() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // SAFETY: `register_functions` has the signature SQLite's automatic extensions take,
        // and is registered once, before the pool opens a connection.
        unsafe {
            ffi::sqlite3_auto_extension(Some(register_functions));
        }
    });
}

/// The FTS5 API of `db`, or null when FTS5 is not compiled in.
#[allow(unsafe_code)]
unsafe fn fts5_api_of(db: *mut ffi::sqlite3) -> *mut ffi::fts5_api {
    let mut statement: *mut ffi::sqlite3_stmt = ptr::null_mut();
    let mut api: *mut ffi::fts5_api = ptr::null_mut();
    // SAFETY: the documented way to reach the FTS5 API: `SELECT fts5(?1)` with a pointer of
    // type "fts5_api_ptr" bound, into which FTS5 writes its API; the statement is finalised.
    unsafe {
        if ffi::sqlite3_prepare_v2(
            db,
            c"SELECT fts5(?1)".as_ptr(),
            -1,
            &mut statement,
            ptr::null_mut(),
        ) != ffi::SQLITE_OK
        {
            return ptr::null_mut();
        }
        ffi::sqlite3_bind_pointer(
            statement,
            1,
            (&raw mut api).cast::<c_void>(),
            c"fts5_api_ptr".as_ptr(),
            None,
        );
        ffi::sqlite3_step(statement);
        ffi::sqlite3_finalize(statement);
    }
    api
}

/// The automatic extension: creates both functions on a new connection.
#[allow(unsafe_code)]
unsafe extern "C" fn register_functions(
    db: *mut ffi::sqlite3,
    _error: *mut *mut c_char,
    _routines: *const ffi::sqlite3_api_routines,
) -> c_int {
    // SAFETY: `db` is the connection SQLite is opening; the FTS5 API it gives lives as long as
    // the connection, and the functions keep no user data.
    unsafe {
        let api = fts5_api_of(db);
        let Some(create) = api.as_ref().and_then(|api| api.xCreateFunction) else {
            return ffi::SQLITE_OK;
        };
        let code = create(
            api,
            c"scope_bm25".as_ptr(),
            ptr::null_mut(),
            Some(scope_bm25),
            None,
        );
        if code != ffi::SQLITE_OK {
            return code;
        }
        create(
            api,
            c"text_length".as_ptr(),
            ptr::null_mut(),
            Some(text_length),
            None,
        )
    }
}

/// BM25 of one row, from its phrase frequencies and length, and the scope's figures
/// (`documents`: the scope's rows holding each phrase, or `None` when not known).
fn bm25(
    frequencies: &[f64],
    documents: Option<&[f64]>,
    length: f64,
    rows: f64,
    average: f64,
) -> f64 {
    let mut score = 0.0;
    for (phrase, frequency) in frequencies.iter().enumerate() {
        if *frequency == 0.0 {
            continue;
        }
        let with_phrase = documents
            .and_then(|documents| documents.get(phrase).copied())
            .unwrap_or(rows / 2.0);
        let mut idf = ((rows - with_phrase + 0.5) / (with_phrase + 0.5)).ln();
        if idf <= 0.0 {
            idf = 1e-6;
        }
        let normalised = K1 * (1.0 - B + B * length / average.max(f64::MIN_POSITIVE));
        score += idf * frequency * (K1 + 1.0) / (frequency + normalised);
    }
    -score
}

/// `scope_bm25(memories_fts, documents, tokens, df_1, …, df_n)` (see the module's comment).
#[allow(unsafe_code)]
unsafe extern "C" fn scope_bm25(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    context: *mut ffi::sqlite3_context,
    count: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: FTS5 calls this with its API, the row's context and `count` argument values; each
    // API function is called as fts5.h documents it.
    unsafe {
        let Some(api) = api.as_ref() else { return };
        let (
            Some(phrase_count),
            Some(inst_count),
            Some(inst),
            Some(column_size),
            Some(row_count),
            Some(total_size),
        ) = (
            api.xPhraseCount,
            api.xInstCount,
            api.xInst,
            api.xColumnSize,
            api.xRowCount,
            api.xColumnTotalSize,
        )
        else {
            ffi::sqlite3_result_error(context, c"scope_bm25: FTS5 lacks a function".as_ptr(), -1);
            return;
        };
        let phrases = phrase_count(fts);
        if count < 2 || values.is_null() {
            ffi::sqlite3_result_error(
                context,
                c"scope_bm25: takes the document count, the token count and one count per phrase"
                    .as_ptr(),
                -1,
            );
            return;
        }
        let values = std::slice::from_raw_parts(values, count as usize);
        let (mut rows, mut tokens) = (
            ffi::sqlite3_value_double(values[0]),
            ffi::sqlite3_value_double(values[1]),
        );
        if tokens < 0.0 {
            let (mut all_rows, mut all_tokens) = (0_i64, 0_i64);
            let code = row_count(fts, &mut all_rows);
            let code = if code == ffi::SQLITE_OK {
                total_size(fts, TEXT_COLUMN, &mut all_tokens)
            } else {
                code
            };
            if code != ffi::SQLITE_OK {
                ffi::sqlite3_result_error_code(context, code);
                return;
            }
            (rows, tokens) = (all_rows as f64, all_tokens as f64);
        }
        let documents: Option<Vec<f64>> = (count == phrases + 2).then(|| {
            values[2..]
                .iter()
                .map(|value| ffi::sqlite3_value_double(*value))
                .collect()
        });
        let mut frequencies = vec![0.0_f64; phrases.max(0) as usize];
        let mut instances = 0;
        let mut code = inst_count(fts, &mut instances);
        for index in 0..instances {
            if code != ffi::SQLITE_OK {
                break;
            }
            let (mut phrase, mut column, mut offset) = (0, 0, 0);
            code = inst(fts, index, &mut phrase, &mut column, &mut offset);
            if code == ffi::SQLITE_OK && column == TEXT_COLUMN {
                if let Some(frequency) = frequencies.get_mut(phrase as usize) {
                    *frequency += 1.0;
                }
            }
        }
        let mut length = 0;
        if code == ffi::SQLITE_OK {
            code = column_size(fts, TEXT_COLUMN, &mut length);
        }
        if code != ffi::SQLITE_OK {
            ffi::sqlite3_result_error_code(context, code);
            return;
        }
        let average = if rows > 0.0 { tokens / rows } else { 1.0 };
        ffi::sqlite3_result_double(
            context,
            bm25(
                &frequencies,
                documents.as_deref(),
                f64::from(length),
                rows,
                average,
            ),
        );
    }
}

/// `text_length(memories_fts)`: the row's text length in tokens.
#[allow(unsafe_code)]
unsafe extern "C" fn text_length(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    context: *mut ffi::sqlite3_context,
    _count: c_int,
    _values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: as for `scope_bm25`.
    unsafe {
        let Some(column_size) = api.as_ref().and_then(|api| api.xColumnSize) else {
            ffi::sqlite3_result_error(context, c"text_length: FTS5 lacks a function".as_ptr(), -1);
            return;
        };
        let mut length = 0;
        let code = column_size(fts, TEXT_COLUMN, &mut length);
        if code == ffi::SQLITE_OK {
            ffi::sqlite3_result_int64(context, i64::from(length));
        } else {
            ffi::sqlite3_result_error_code(context, code);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::bm25;

    #[test]
    fn rare_words_weigh_more_and_long_rows_less() {
        // One phrase in 1 of 100 rows against one in 40 of them, same row.
        let rare = bm25(&[1.0], Some(&[1.0]), 10.0, 100.0, 10.0);
        let common = bm25(&[1.0], Some(&[40.0]), 10.0, 100.0, 10.0);
        assert!(rare < common && common < 0.0, "{rare} {common}");
        // The same hit in a row twice as long as the average scores less.
        let long = bm25(&[1.0], Some(&[1.0]), 20.0, 100.0, 10.0);
        assert!(long > rare, "{long} {rare}");
        // A phrase in every row still counts a little, and no hit counts nothing.
        assert!(bm25(&[1.0], Some(&[100.0]), 10.0, 100.0, 10.0) < 0.0);
        assert_eq!(bm25(&[0.0], Some(&[1.0]), 10.0, 100.0, 10.0), 0.0);
        // Counts not known: a phrase weighs as one in half the rows.
        assert_eq!(
            bm25(&[1.0], None, 10.0, 100.0, 10.0),
            bm25(&[1.0], Some(&[50.0]), 10.0, 100.0, 10.0)
        );
    }
}
