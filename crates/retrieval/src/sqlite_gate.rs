//! The native-SQLite gate (spec 50, Layer 1): the bundled SQLite really has what retrieval
//! needs – FTS5 with the tokenizer options the store uses, contentless-delete tables,
//! fts5vocab, JSON – on a real file database. A check, not an assumption: the store's own
//! SQL is what runs.

use std::path::Path;

/// One capability the gate checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

/// Opens a file database in `dir`, creates, writes, reads and closes it; every check's
/// result (an `Err` only when the database could not be opened at all).
pub fn run(dir: &Path) -> Result<Vec<Check>, rusqlite::Error> {
    let path = dir.join("sqlite-gate.sqlite");
    let _ = std::fs::remove_file(&path);
    let conn = rusqlite::Connection::open(&path)?;
    let mut checks = Vec::new();
    let mut check = |name: &'static str, result: Result<String, rusqlite::Error>| {
        checks.push(match result {
            Ok(detail) => Check {
                name,
                ok: true,
                detail,
            },
            Err(e) => Check {
                name,
                ok: false,
                detail: e.to_string(),
            },
        });
    };
    check(
        "version",
        conn.query_row("SELECT sqlite_version()", [], |r| r.get(0)),
    );
    check(
        "fts5",
        conn.execute_batch(
            "CREATE VIRTUAL TABLE gate_fts USING fts5(terms, content='', contentless_delete=1,
               tokenize = \"unicode61 remove_diacritics 0 categories 'L* N* Co M*' tokenchars '_'\");
             INSERT INTO gate_fts (rowid, terms) VALUES (1, 'dev_ttyusb0 串口 波特率');
             DELETE FROM gate_fts WHERE rowid = 1;
             INSERT INTO gate_fts (rowid, terms) VALUES (2, 'parse_frame 压缩 缩架');",
        )
        .and_then(|()| {
            conn.query_row(
                "SELECT rowid FROM gate_fts WHERE gate_fts MATCH '\"parse_frame\" OR \"缩架\"'",
                [],
                |r| r.get::<_, i64>(0),
            )
        })
        .and_then(|rowid| {
            let gone: i64 = conn.query_row(
                "SELECT count(*) FROM gate_fts WHERE gate_fts MATCH '\"串口\"'",
                [],
                |r| r.get(0),
            )?;
            Ok(format!("match rowid {rowid}, deleted rows left {gone}"))
        })
        .and_then(|d| {
            if d == "match rowid 2, deleted rows left 0" {
                Ok(d)
            } else {
                Err(rusqlite::Error::InvalidQuery)
            }
        }),
    );
    check(
        "fts5vocab",
        conn.execute_batch("CREATE VIRTUAL TABLE gate_vocab USING fts5vocab(gate_fts, 'row');")
            .and_then(|()| {
                conn.query_row(
                    "SELECT doc FROM gate_vocab WHERE term = '缩架'",
                    [],
                    |r| r.get::<_, i64>(0),
                )
            })
            .map(|n| format!("doc count {n}")),
    );
    check(
        "json",
        conn.query_row(
            "SELECT json_extract('{\"a\":[1,2,{\"b\":\"ok\"}]}', '$.a[2].b')",
            [],
            |r| r.get(0),
        ),
    );
    check(
        "write-read",
        conn.execute_batch(
            "CREATE TABLE gate_rows (id TEXT PRIMARY KEY, v BLOB);
             INSERT INTO gate_rows VALUES ('a', x'0000803f');",
        )
        .and_then(|()| {
            conn.query_row("SELECT hex(v) FROM gate_rows WHERE id = 'a'", [], |r| {
                r.get(0)
            })
        }),
    );
    drop(conn);
    // Reopened: what was written is on disk.
    let conn = rusqlite::Connection::open(&path)?;
    check(
        "reopen",
        conn.query_row("SELECT count(*) FROM gate_rows", [], |r| r.get::<_, i64>(0))
            .map(|n| format!("{n} row")),
    );
    drop(conn);
    let _ = std::fs::remove_file(&path);
    Ok(checks)
}
