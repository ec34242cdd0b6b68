//! The table the sink writes: its name checked and quoted, created when missing (as a
//! TimescaleDB hypertable when that extension is installed, with the index a dashboard's
//! query wants), and its columns checked before the first row goes in, so a table of
//! another shape gets a sentence, not a COPY error. A table that was there is left with the
//! indexes its owner gave it: the index is most of what a row costs the server.

use tokio_postgres::Client;

use crate::SinkError;

/// The columns, in the order every row is sent.
pub const COLUMNS: [(&str, &str); 5] = [
    ("time", "timestamp with time zone"),
    ("bench", "text"),
    ("dataset", "text"),
    ("value", "double precision"),
    ("text", "text"),
];

/// A table name checked to be `name` or `schema.name`, each part `[A-Za-z_][A-Za-z0-9_]*`
/// of at most 63 bytes (PostgreSQL's limit): nothing in it can close the quotes around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableName {
    schema: Option<String>,
    name: String,
}

fn is_identifier(part: &str) -> bool {
    let mut chars = part.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && part.len() <= 63
}

impl TableName {
    pub fn parse(text: &str) -> Result<TableName, SinkError> {
        let text = text.trim();
        let parts: Vec<&str> = text.split('.').collect();
        let bad = || {
            SinkError::Config(format!(
                "`{text}` cannot name the table: give `name` or `schema.name`, each made of \
                 letters, digits and `_` (not starting with a digit, at most 63 characters)"
            ))
        };
        match parts.as_slice() {
            [name] if is_identifier(name) => Ok(TableName {
                schema: None,
                name: name.to_string(),
            }),
            [schema, name] if is_identifier(schema) && is_identifier(name) => Ok(TableName {
                schema: Some(schema.to_string()),
                name: name.to_string(),
            }),
            _ => Err(bad()),
        }
    }

    /// The name quoted for SQL (`"schema"."name"`); case is kept as written.
    pub fn quoted(&self) -> String {
        match &self.schema {
            Some(schema) => format!("\"{schema}\".\"{}\"", self.name),
            None => format!("\"{}\"", self.name),
        }
    }

    /// The name as a person wrote it, for messages.
    pub fn display(&self) -> String {
        match &self.schema {
            Some(schema) => format!("{schema}.{}", self.name),
            None => self.name.clone(),
        }
    }

    /// The `COPY` statement that fills the table.
    pub fn copy_statement(&self) -> String {
        let columns: Vec<&str> = COLUMNS.iter().map(|(c, _)| *c).collect();
        format!(
            "COPY {} ({}) FROM STDIN (FORMAT binary)",
            self.quoted(),
            columns.join(", ")
        )
    }

    /// Creates the table if it is missing, and checks the columns of one that exists.
    pub async fn prepare(&self, client: &Client) -> Result<(), SinkError> {
        let columns: Vec<String> = COLUMNS
            .iter()
            .map(|(c, t)| {
                let not_null = if matches!(*c, "time" | "bench" | "dataset") {
                    " NOT NULL"
                } else {
                    ""
                };
                format!("{c} {t}{not_null}")
            })
            .collect();
        let t = self.quoted();
        // A table someone made is theirs: its columns are checked, its indexes left alone.
        let existed: bool = client
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&t])
            .await
            .map_err(|e| SinkError::server("could not look for the table", &e))?
            .get(0);
        client
            .batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS {t} ({})",
                columns.join(", ")
            ))
            .await
            .map_err(|e| {
                SinkError::server(
                    &format!("could not create the table {}", self.display()),
                    &e,
                )
            })?;
        let rows = client
            .query(
                "SELECT column_name::text, data_type::text FROM information_schema.columns \
                 WHERE table_schema = COALESCE($1, current_schema()) AND table_name = $2 \
                 ORDER BY ordinal_position",
                &[&self.schema, &self.name],
            )
            .await
            .map_err(|e| SinkError::server("could not read the table's columns", &e))?;
        let found: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let missing: Vec<String> = COLUMNS
            .iter()
            .filter(|(c, t)| !found.iter().any(|(fc, ft)| fc == c && ft == t))
            .map(|(c, t)| format!("{c} ({t})"))
            .collect();
        if !missing.is_empty() {
            return Err(SinkError::Table(format!(
                "the table {} exists but lacks the columns {}: name another table in the \
                 PostgreSQL settings, or add those columns",
                self.display(),
                missing.join(", ")
            )));
        }
        if existed {
            return Ok(());
        }
        // TimescaleDB, when installed in this database, partitions the table by time. A
        // plain PostgreSQL table works the same for every query; this only makes long
        // histories cheaper.
        let timescale = client
            .query_opt(
                "SELECT 1 FROM pg_extension WHERE extname = 'timescaledb'",
                &[],
            )
            .await
            .map_err(|e| SinkError::server("could not look for TimescaleDB", &e))?
            .is_some();
        if timescale {
            client
                .execute(
                    "SELECT create_hypertable($1::text::regclass, 'time', if_not_exists => TRUE, migrate_data => TRUE)",
                    &[&t],
                )
                .await
                .map_err(|e| SinkError::server("could not make the table a hypertable", &e))?;
        }
        // The index every dashboard query over one dataset wants. Its name is cut so that
        // PostgreSQL does not cut it differently for two tables.
        let mut index = format!("{}_bench_dataset_time", self.name);
        index.truncate(63);
        client
            .batch_execute(&format!(
                "CREATE INDEX IF NOT EXISTS \"{index}\" ON {t} (bench, dataset, time DESC)"
            ))
            .await
            .map_err(|e| SinkError::server("could not index the table", &e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_quoted() {
        let rows: &[(&str, Option<&str>)] = &[
            ("sextant_samples", Some("\"sextant_samples\"")),
            (" lab.Samples_2 ", Some("\"lab\".\"Samples_2\"")),
            ("_x", Some("\"_x\"")),
            ("", None),
            ("2fast", None),
            ("a.b.c", None),
            ("a.", None),
            ("x\"; DROP TABLE y; --", None),
            ("name with space", None),
            ("naïve", None),
            (&"a".repeat(64), None),
        ];
        for (text, quoted) in rows {
            let got = TableName::parse(text).ok().map(|t| t.quoted());
            assert_eq!(got.as_deref(), *quoted, "{text:?}");
        }
        let long = "a".repeat(63);
        assert!(TableName::parse(&long).is_ok());
    }

    #[test]
    fn the_copy_names_every_column_in_order() {
        let t = TableName::parse("lab.s").unwrap();
        assert_eq!(
            t.copy_statement(),
            "COPY \"lab\".\"s\" (time, bench, dataset, value, text) FROM STDIN (FORMAT binary)"
        );
    }
}
