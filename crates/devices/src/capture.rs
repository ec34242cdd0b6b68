//! Raw capture files: every chunk a source delivered, with its timestamps, so a replay
//! reproduces the session bit for bit.
//!
//! Format (little-endian): the 8-byte magic `SXTCAP01`, then records of
//! `source: u16, elapsed_ns: u64, unix_ns: i64, len: u32, bytes[len]`. Records are
//! appended as they arrive, so a capture cut short by a crash loses at most its last,
//! partial record – which the reader reports and skips instead of failing.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

use bytes::Bytes;
use sextant_telemetry::Timestamp;

pub const MAGIC: &[u8; 8] = b"SXTCAP01";
const HEADER: usize = 2 + 8 + 8 + 4;
/// Largest record accepted when reading, so a corrupt length cannot exhaust memory.
pub const MAX_RECORD: u32 = 64 * 1024 * 1024;

/// One captured chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub source: u16,
    pub timestamp: Timestamp,
    pub data: Bytes,
}

/// Appends records to a capture file.
pub struct CaptureWriter<W: Write> {
    out: W,
    records: u64,
    bytes: u64,
}

impl CaptureWriter<BufWriter<File>> {
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = sextant_fsutil::create_file(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("could not create capture {}: {e}", path.display()),
            )
        })?;
        CaptureWriter::new(BufWriter::with_capacity(256 * 1024, file))
    }
}

impl<W: Write> CaptureWriter<W> {
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(MAGIC)?;
        Ok(CaptureWriter {
            out,
            records: 0,
            bytes: 0,
        })
    }

    pub fn write(&mut self, source: u16, timestamp: Timestamp, data: &[u8]) -> io::Result<()> {
        let len = u32::try_from(data.len())
            .ok()
            .filter(|l| *l <= MAX_RECORD)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "chunk too large for a capture record",
                )
            })?;
        let mut header = [0u8; HEADER];
        header[0..2].copy_from_slice(&source.to_le_bytes());
        header[2..10].copy_from_slice(&timestamp.elapsed_ns.to_le_bytes());
        header[10..18].copy_from_slice(&timestamp.unix_ns.to_le_bytes());
        header[18..22].copy_from_slice(&len.to_le_bytes());
        self.out.write_all(&header)?;
        self.out.write_all(data)?;
        self.records += 1;
        self.bytes += data.len() as u64;
        Ok(())
    }

    pub fn records(&self) -> u64 {
        self.records
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Why a capture could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("could not read capture: {0}")]
    Io(#[from] io::Error),
    #[error("not a Sextant capture (bad magic); raw byte files replay with `--raw`")]
    BadMagic,
    #[error("record {index} claims {len} bytes, more than the {MAX_RECORD}-byte limit; the file is corrupt")]
    Corrupt { index: u64, len: u32 },
}

/// Reads records in order.
pub struct CaptureReader<R: Read> {
    input: R,
    index: u64,
    /// The file ended inside a record (a crash while recording).
    pub truncated: bool,
}

impl CaptureReader<BufReader<File>> {
    pub fn open(path: &Path) -> Result<Self, CaptureError> {
        let file = File::open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        CaptureReader::new(BufReader::with_capacity(256 * 1024, file))
    }
}

/// Reads as many bytes as are there, up to `buf.len()`.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl<R: Read> CaptureReader<R> {
    pub fn new(mut input: R) -> Result<Self, CaptureError> {
        let mut magic = [0u8; 8];
        if read_full(&mut input, &mut magic)? != 8 || &magic != MAGIC {
            return Err(CaptureError::BadMagic);
        }
        Ok(CaptureReader {
            input,
            index: 0,
            truncated: false,
        })
    }

    /// A reader already positioned at a record boundary (after the magic); replay seeks
    /// with it.
    pub fn without_magic(input: R) -> Self {
        CaptureReader {
            input,
            index: 0,
            truncated: false,
        }
    }

    pub(crate) fn input_ref(&self) -> &R {
        &self.input
    }

    /// The next record, `None` at the end (check [`truncated`](Self::truncated)).
    pub fn next_record(&mut self) -> Result<Option<Record>, CaptureError> {
        let mut header = [0u8; HEADER];
        match read_full(&mut self.input, &mut header)? {
            0 => return Ok(None),
            n if n < HEADER => {
                self.truncated = true;
                return Ok(None);
            }
            _ => {}
        }
        let source = u16::from_le_bytes([header[0], header[1]]);
        let elapsed_ns = u64::from_le_bytes(header[2..10].try_into().expect("8 bytes"));
        let unix_ns = i64::from_le_bytes(header[10..18].try_into().expect("8 bytes"));
        let len = u32::from_le_bytes(header[18..22].try_into().expect("4 bytes"));
        if len > MAX_RECORD {
            return Err(CaptureError::Corrupt {
                index: self.index,
                len,
            });
        }
        let mut data = vec![0u8; len as usize];
        if read_full(&mut self.input, &mut data)? < data.len() {
            self.truncated = true;
            return Ok(None);
        }
        self.index += 1;
        Ok(Some(Record {
            source,
            timestamp: Timestamp {
                elapsed_ns,
                unix_ns,
            },
            data: data.into(),
        }))
    }
}

impl<R: Read> Iterator for CaptureReader<R> {
    type Item = Result<Record, CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_bit_exact_and_truncation_is_reported() {
        let mut w = CaptureWriter::new(Vec::new()).unwrap();
        let records: Vec<Record> = (0..50u16)
            .map(|i| Record {
                source: i % 3,
                timestamp: Timestamp {
                    elapsed_ns: i as u64 * 1_000_003,
                    unix_ns: 1_700_000_000_000_000_000 + i as i64,
                },
                data: (0..i as u8)
                    .map(|b| b.wrapping_mul(37))
                    .collect::<Vec<u8>>()
                    .into(),
            })
            .collect();
        for r in &records {
            w.write(r.source, r.timestamp, &r.data).unwrap();
        }
        let bytes = w.into_inner();
        let back: Vec<Record> = CaptureReader::new(&bytes[..])
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(back, records);

        let mut cut = CaptureReader::new(&bytes[..bytes.len() - 3]).unwrap();
        let n = cut.by_ref().count();
        assert_eq!(n, 49);
        assert!(cut.truncated);

        assert!(matches!(
            CaptureReader::new(&b"garbage!"[..]),
            Err(CaptureError::BadMagic)
        ));
        let mut corrupt = MAGIC.to_vec();
        corrupt.extend_from_slice(&[0u8; 18]);
        corrupt.extend_from_slice(&u32::MAX.to_le_bytes());
        let mut r = CaptureReader::new(&corrupt[..]).unwrap();
        assert!(matches!(r.next_record(), Err(CaptureError::Corrupt { .. })));
    }
}
