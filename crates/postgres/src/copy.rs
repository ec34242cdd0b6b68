//! PostgreSQL's binary `COPY` format for the sink's rows, encoded straight into one buffer
//! per batch.
//!
//! Why by hand rather than `tokio_postgres::binary_copy::BinaryCopyInWriter`: that writer
//! awaits once per row and converts each field through `ToSql`'s dynamic dispatch; a batch
//! here is tens of thousands of rows of five fixed fields, and a batch that failed to go in
//! is sent again as it is after a reconnect, which one encoded buffer makes free.
//! The format: <https://www.postgresql.org/docs/current/sql-copy.html> ("Binary Format").

use bytes::{BufMut, Bytes, BytesMut};
use sextant_telemetry::Value;

/// `PGCOPY\n\377\r\n\0`, then the flags and the header extension length (both 0).
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";
/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01 00:00:00 UTC).
const PG_EPOCH_US: i64 = 946_684_800_000_000;

/// The rows of one `COPY`, being encoded.
pub(crate) struct CopyBatch {
    buf: BytesMut,
    pub rows: u64,
    pub frames: u64,
}

impl CopyBatch {
    pub fn new() -> CopyBatch {
        let mut buf = BytesMut::with_capacity(1 << 16);
        buf.put_slice(HEADER);
        CopyBatch {
            buf,
            rows: 0,
            frames: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.frames == 0
    }

    /// One frame: a row for each dataset with a value in it (a `Null` is "no new value").
    pub fn frame(&mut self, unix_ns: i64, bench: &str, columns: &[String], values: &[Value]) {
        let time = unix_ns.div_euclid(1_000) - PG_EPOCH_US;
        for (column, value) in columns.iter().zip(values) {
            if matches!(value, Value::Null) {
                continue;
            }
            let buf = &mut self.buf;
            buf.put_i16(5);
            buf.put_i32(8);
            buf.put_i64(time);
            put_text(buf, bench);
            put_text(buf, column);
            match value {
                Value::Number(n) => {
                    buf.put_i32(8);
                    buf.put_f64(*n);
                    buf.put_i32(-1);
                }
                Value::Text(t) => {
                    buf.put_i32(-1);
                    put_text(buf, t);
                }
                Value::Null => unreachable!("skipped above"),
            }
            self.rows += 1;
        }
        self.frames += 1;
    }

    /// The finished `COPY` data (the trailer added).
    pub fn finish(mut self) -> Bytes {
        self.buf.put_i16(-1);
        self.buf.freeze()
    }
}

fn put_text(buf: &mut BytesMut, text: &str) {
    // A field is at most 1 GB in PostgreSQL; a text value of a frame is far below, and a
    // line longer than the framing allows never becomes a frame.
    buf.put_i32(text.len() as i32);
    buf.put_slice(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_becomes_a_row_per_value_and_nulls_are_skipped() {
        let mut b = CopyBatch::new();
        let columns = vec!["G/a".to_string(), "G/b".to_string(), "G/c".to_string()];
        b.frame(
            946_684_800_000_001_999,
            "x",
            &columns,
            &[Value::Number(1.5), Value::Null, Value::Text("ok".into())],
        );
        assert_eq!((b.rows, b.frames), (2, 1));
        let data = b.finish();
        let mut expect = HEADER.to_vec();
        // row 1: time 1 µs after PostgreSQL's epoch (the 999 ns are cut), number 1.5
        expect.extend([0, 5, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1]);
        expect.extend([0, 0, 0, 1, b'x', 0, 0, 0, 3, b'G', b'/', b'a']);
        expect.extend([0, 0, 0, 8]);
        expect.extend(1.5f64.to_be_bytes());
        expect.extend([0xff, 0xff, 0xff, 0xff]);
        // row 2: text
        expect.extend([0, 5, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1]);
        expect.extend([0, 0, 0, 1, b'x', 0, 0, 0, 3, b'G', b'/', b'c']);
        expect.extend([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 2, b'o', b'k']);
        expect.extend([0xff, 0xff]);
        assert_eq!(&data[..], &expect[..]);
    }

    #[test]
    fn times_before_postgres_epoch_and_before_unix_epoch_floor_to_the_microsecond() {
        let mut b = CopyBatch::new();
        let columns = vec!["a".to_string()];
        b.frame(-1, "", &columns, &[Value::Number(0.0)]);
        let data = b.finish();
        let t = i64::from_be_bytes(
            data[HEADER.len() + 6..HEADER.len() + 14]
                .try_into()
                .unwrap(),
        );
        assert_eq!(t, -1 - PG_EPOCH_US);
    }
}
