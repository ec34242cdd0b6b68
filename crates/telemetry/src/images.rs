//! Cutting whole images out of a device's byte stream, for the dashboard's image view.
//!
//! A camera board often sends its pictures on the same link as its telemetry: JPEG or PNG
//! files between lines of CSV. [`ImageCutter`] reads the raw bytes as they arrive (any
//! split) and hands back each complete image; what lies between images is ignored.
//!
//! - **Auto** finds images by their magic bytes and follows each format's own structure to
//!   its end: JPEG by its segments (so a thumbnail inside an EXIF block does not end the
//!   picture early) up to the end-of-image marker, PNG by its chunks up to `IEND`, WebP by
//!   its RIFF length.
//! - **Markers** takes the bytes from a start sequence through the next end sequence
//!   (Serial Studio's manual mode): the picture is what lies between them, or the whole
//!   when the markers are the picture's own (a JPEG's `FF D8` … `FF D9`).
//!
//! An image larger than the cap, or a structure that breaks off (a JPEG segment without its
//! marker byte), is dropped and counted in [`ImageCutter::broken`]; the search starts again
//! right after the bad start, so a false start inside telemetry costs nothing more.

use memchr::memmem;

/// The default cap on one image (a 16 MiB picture is far larger than any link here sends).
pub const MAX_IMAGE_BYTES: usize = 16 * 1024 * 1024;

/// An image's format, by what its bytes say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Jpeg,
    Png,
    Webp,
    /// Cut by the project's own markers; the browser finds out what it is.
    Other,
}

impl ImageFormat {
    /// The MIME type a browser decodes it as.
    pub fn mime(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "image/jpeg",
            ImageFormat::Png => "image/png",
            ImageFormat::Webp => "image/webp",
            ImageFormat::Other => "application/octet-stream",
        }
    }

    /// What the first bytes of `bytes` are, when they are an image's.
    pub fn sniff(bytes: &[u8]) -> ImageFormat {
        if bytes.starts_with(JPEG_SOI) {
            ImageFormat::Jpeg
        } else if bytes.starts_with(PNG_SIGNATURE) {
            ImageFormat::Png
        } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
            ImageFormat::Webp
        } else {
            ImageFormat::Other
        }
    }
}

/// How images are found in the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detection {
    /// By magic bytes and the format's structure.
    Auto,
    /// From `start` through the next `end`, both included.
    Markers { start: Vec<u8>, end: Vec<u8> },
}

const JPEG_SOI: &[u8] = &[0xFF, 0xD8, 0xFF];
const PNG_SIGNATURE: &[u8] = &[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];

/// Cuts images out of one byte stream; see the module docs.
pub struct ImageCutter {
    detection: Detection,
    max_bytes: usize,
    /// Bytes not yet decided on: an image being read (from its first byte), or the tail of
    /// the stream that may hold the start of a signature.
    buf: Vec<u8>,
    /// The format of the image being read from the start of `buf`, when one is.
    reading: Option<ImageFormat>,
    /// How far the image being read has been walked, so each read only walks its new bytes.
    progress: Progress,
    broken: u64,
}

/// Where the walk of an image stopped for want of bytes: the next structure starts at
/// `at` (a JPEG marker, a PNG chunk, where to look for an end marker); `in_scan` when a
/// JPEG's entropy-coded data runs from `at`.
#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    at: usize,
    in_scan: bool,
}

/// What the reading of an image at the start of a buffer found.
enum Walk {
    /// The image is the first `n` bytes.
    Done(usize),
    /// More bytes are needed.
    More,
    /// A damaged image (counted).
    Broken,
    /// Not an image after all: a signature's first bytes that went on otherwise.
    NotImage,
}

impl ImageCutter {
    /// A cutter for `detection`; markers with an empty start or end find pictures by their
    /// magic bytes instead (an empty sequence would match everywhere).
    pub fn new(detection: Detection, max_bytes: usize) -> ImageCutter {
        let detection = match detection {
            Detection::Markers { start, end } if start.is_empty() || end.is_empty() => {
                Detection::Auto
            }
            other => other,
        };
        ImageCutter {
            detection,
            max_bytes: max_bytes.max(16),
            buf: Vec::new(),
            reading: None,
            progress: Progress::default(),
            broken: 0,
        }
    }

    /// Images started but dropped: over the cap, or broken off.
    pub fn broken(&self) -> u64 {
        self.broken
    }

    /// Feeds the next bytes of the stream; calls `image` with each complete one.
    pub fn push(&mut self, bytes: &[u8], mut image: impl FnMut(ImageFormat, &[u8])) {
        self.buf.extend_from_slice(bytes);
        loop {
            if self.reading.is_none() {
                match self.find_start() {
                    Some((at, format)) => {
                        self.buf.drain(..at);
                        self.reading = Some(format);
                        self.progress = Progress::default();
                    }
                    None => {
                        // Keep only what could be the start of a signature split across reads.
                        let keep = self.longest_start() - 1;
                        let cut = self.buf.len().saturating_sub(keep);
                        self.buf.drain(..cut);
                        return;
                    }
                }
            }
            let format = self.reading.expect("set above");
            match self.walk(format) {
                Walk::Done(n) => {
                    let (format, picture) = self.picture(format, n);
                    image(format, picture);
                    self.buf.drain(..n);
                    self.reading = None;
                }
                Walk::More if self.buf.len() <= self.max_bytes => return,
                Walk::More if matches!(self.detection, Detection::Markers { .. }) => {
                    // No end anywhere after the first start, so none after any later start
                    // either: nothing in the buffer can become a picture. Drop it whole.
                    self.broken += 1;
                    let keep = self.longest_start() - 1;
                    let cut = self.buf.len().saturating_sub(keep);
                    self.buf.drain(..cut);
                    self.reading = None;
                    return;
                }
                walk => {
                    // Skip this start and look again after it.
                    if !matches!(walk, Walk::NotImage) {
                        self.broken += 1;
                    }
                    self.buf.drain(..1);
                    self.reading = None;
                }
            }
        }
    }

    /// The picture among the `n` bytes just cut: with markers, the bytes between them –
    /// unless the markers are the picture's own (a JPEG's `FF D8` … `FF D9`), when the
    /// whole is the picture.
    fn picture(&self, format: ImageFormat, n: usize) -> (ImageFormat, &[u8]) {
        let whole = &self.buf[..n];
        match &self.detection {
            Detection::Markers { start, end } => match ImageFormat::sniff(whole) {
                ImageFormat::Other => {
                    let inner = &whole[start.len()..n - end.len()];
                    (ImageFormat::sniff(inner), inner)
                }
                own => (own, whole),
            },
            Detection::Auto => (format, whole),
        }
    }

    fn longest_start(&self) -> usize {
        match &self.detection {
            Detection::Auto => 12,
            Detection::Markers { start, .. } => start.len().max(1),
        }
    }

    /// The first place an image starts in `buf`, and its format.
    fn find_start(&self) -> Option<(usize, ImageFormat)> {
        match &self.detection {
            Detection::Markers { start, .. } => memmem::find(&self.buf, start).map(|at| {
                let format = ImageFormat::sniff(&self.buf[at..]);
                (at, format)
            }),
            Detection::Auto => {
                let starts = [
                    memmem::find(&self.buf, JPEG_SOI).map(|at| (at, ImageFormat::Jpeg)),
                    memmem::find(&self.buf, PNG_SIGNATURE).map(|at| (at, ImageFormat::Png)),
                    webp_start(&self.buf).map(|at| (at, ImageFormat::Webp)),
                ];
                starts.into_iter().flatten().min_by_key(|(at, _)| *at)
            }
        }
    }

    fn walk(&mut self, format: ImageFormat) -> Walk {
        let (buf, p) = (&self.buf, &mut self.progress);
        if let Detection::Markers { start, end } = &self.detection {
            let from = p.at.max(start.len());
            return match memmem::find(&buf[from..], end) {
                Some(at) => Walk::Done(from + at + end.len()),
                None => {
                    // The end may begin in the last bytes; look there again next time.
                    p.at = buf.len().saturating_sub(end.len() - 1).max(from);
                    Walk::More
                }
            };
        }
        match format {
            ImageFormat::Jpeg => walk_jpeg(buf, p),
            ImageFormat::Png => walk_png(buf, p, self.max_bytes),
            ImageFormat::Webp => walk_webp(buf, self.max_bytes),
            ImageFormat::Other => Walk::Broken,
        }
    }
}

/// A `RIFF....WEBP` header in `buf`.
fn webp_start(buf: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = memmem::find(&buf[from..], b"RIFF") {
        let at = from + at;
        match buf.get(at + 8..at + 12) {
            Some(b"WEBP") => return Some(at),
            // Too short to tell: report it, and the walk decides once more bytes came.
            None => return Some(at),
            Some(_) => from = at + 1,
        }
    }
    None
}

/// A JPEG from SOI through EOI: marker segments by their lengths, then entropy-coded data
/// (where `FF 00` is a data byte and `FF D0`–`FF D7` are restart markers) up to the next
/// marker; a picture may have several scans, so the segments go on after each.
fn walk_jpeg(buf: &[u8], p: &mut Progress) -> Walk {
    let mut i = p.at.max(2);
    if p.in_scan {
        match scan_end(buf, i) {
            Some(end) => {
                i = end;
                p.in_scan = false;
            }
            None => return more(p, buf, true),
        }
    }
    loop {
        p.at = i;
        // Fill bytes (FF FF …) may pad before a marker.
        let Some(&b) = buf.get(i) else {
            return Walk::More;
        };
        if b != 0xFF {
            return Walk::Broken;
        }
        let mut j = i + 1;
        while buf.get(j) == Some(&0xFF) {
            j += 1;
        }
        let Some(&marker) = buf.get(j) else {
            // Any FF of the fill is as good a place to go on from: the last one.
            p.at = j - 1;
            return Walk::More;
        };
        i = j + 1;
        match marker {
            0xD9 => return Walk::Done(i),
            // Markers without a length.
            0x01 | 0xD0..=0xD7 => continue,
            0x00 | 0xD8 => return Walk::Broken,
            _ => {}
        }
        let Some(len) = buf.get(i..i + 2) else {
            return Walk::More;
        };
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        if len < 2 {
            return Walk::Broken;
        }
        i += len;
        if marker == 0xDA {
            if buf.len() < i {
                return Walk::More;
            }
            p.at = i;
            match scan_end(buf, i) {
                Some(end) => i = end,
                None => return more(p, buf, true),
            }
        }
    }
}

/// Where a JPEG's entropy-coded data starting at `from` ends: the next marker that is not
/// a stuffed byte (`FF 00`), a restart (`FF D0`–`FF D7`) or fill; `None` when the bytes so
/// far do not reach it.
fn scan_end(buf: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let at = from + memchr::memchr(0xFF, buf.get(from..)?)?;
        match buf.get(at + 1)? {
            0x00 | 0xD0..=0xD7 | 0xFF => from = at + 1,
            _ => return Some(at),
        }
    }
}

/// A JPEG walk waiting for bytes inside entropy data: resume a byte before the end, where
/// an `FF` may be waiting for the byte after it.
fn more(p: &mut Progress, buf: &[u8], in_scan: bool) -> Walk {
    p.in_scan = in_scan;
    p.at = p.at.max(buf.len().saturating_sub(1));
    Walk::More
}

/// A PNG from its signature through the `IEND` chunk (with its CRC).
fn walk_png(buf: &[u8], p: &mut Progress, max_bytes: usize) -> Walk {
    let mut i = p.at.max(PNG_SIGNATURE.len());
    loop {
        p.at = i;
        let Some(head) = buf.get(i..i + 8) else {
            return Walk::More;
        };
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let kind = &head[4..8];
        if !kind.iter().all(u8::is_ascii_alphabetic) || len > (1 << 31) {
            return Walk::Broken;
        }
        i = i.saturating_add(12).saturating_add(len);
        // A chunk that would end past the cap: not worth waiting 16 MiB to find out.
        if i > max_bytes {
            return Walk::Broken;
        }
        if kind == b"IEND" {
            return if buf.len() >= i {
                Walk::Done(i)
            } else {
                Walk::More
            };
        }
    }
}

/// A WebP by its RIFF length.
fn walk_webp(buf: &[u8], max_bytes: usize) -> Walk {
    let Some(head) = buf.get(..12) else {
        return Walk::More;
    };
    let len = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
    // The length counts "WEBP" and at least one chunk header.
    if &head[8..12] != b"WEBP" || len < 12 {
        return Walk::NotImage;
    }
    let total = len.saturating_add(8 + (len & 1));
    if total > max_bytes {
        return Walk::Broken;
    }
    if buf.len() >= total {
        Walk::Done(total)
    } else {
        Walk::More
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small but structurally whole JPEG: SOI, an APP1 segment holding a whole thumbnail
    /// JPEG (its own SOI and EOI), a quantisation table, SOS, entropy data with a stuffed
    /// byte and a restart marker, a second scan, EOI.
    fn jpeg(fill: u8) -> Vec<u8> {
        let thumb = [0xFF, 0xD8, 0xFF, 0xD9];
        let mut v = vec![0xFF, 0xD8];
        v.extend([0xFF, 0xE1]);
        v.extend(((2 + thumb.len()) as u16).to_be_bytes());
        v.extend(thumb);
        v.extend([0xFF, 0xDB, 0x00, 0x04, fill, fill]);
        v.extend([0xFF, 0xDA, 0x00, 0x03, 0x01]);
        v.extend([fill, 0xFF, 0x00, fill, 0xFF, 0xD0, fill, fill]);
        v.extend([0xFF, 0xDA, 0x00, 0x03, 0x02, fill]);
        v.extend([0xFF, 0xD9]);
        v
    }

    fn png(fill: u8) -> Vec<u8> {
        let mut v = PNG_SIGNATURE.to_vec();
        for (kind, data) in [
            (b"IHDR", vec![fill; 13]),
            (b"IDAT", vec![fill; 5]),
            (b"IEND", vec![]),
        ] {
            v.extend((data.len() as u32).to_be_bytes());
            v.extend(kind);
            v.extend(&data);
            v.extend([0, 0, 0, 0]);
        }
        v
    }

    fn webp(fill: u8) -> Vec<u8> {
        let body = [
            b'W', b'E', b'B', b'P', b'V', b'P', b'8', b'L', 1, 0, 0, 0, fill,
        ];
        let mut v = b"RIFF".to_vec();
        v.extend((body.len() as u32).to_le_bytes());
        v.extend(body);
        v.push(0); // padding to an even length
        v
    }

    fn cut(detection: Detection, stream: &[u8], step: usize) -> (Vec<(ImageFormat, Vec<u8>)>, u64) {
        let mut cutter = ImageCutter::new(detection, 4096);
        let mut out = Vec::new();
        for piece in stream.chunks(step.max(1)) {
            cutter.push(piece, |f, b| out.push((f, b.to_vec())));
        }
        (out, cutter.broken())
    }

    #[test]
    fn images_between_telemetry_lines_come_out_whole_however_the_stream_is_split() {
        let mut stream = b"1.0,2.0,3.0\nBM not an image RIFF nor this\n".to_vec();
        let images = [jpeg(0x11), png(0x22), webp(0x33), jpeg(0x44)];
        for img in &images {
            stream.extend(img);
            stream.extend(b"4.5,6.0,7.25\n");
        }
        for step in [1, 2, 3, 7, 64, stream.len()] {
            let (got, broken) = cut(Detection::Auto, &stream, step);
            let want: Vec<_> = images
                .iter()
                .map(|i| (ImageFormat::sniff(i), i.clone()))
                .collect();
            assert_eq!(got, want, "split every {step} bytes");
            assert_eq!(broken, 0, "split every {step} bytes");
        }
    }

    #[test]
    fn markers_cut_the_picture_between_them_or_the_whole_when_they_are_its_own() {
        // Framing markers around a PNG and around bytes of no known format: what lies
        // between them.
        let mut stream = b"xx<IMG>".to_vec();
        stream.extend(png(0x77));
        stream.extend(b"<END>yy<IMG>de<END>");
        let detection = Detection::Markers {
            start: b"<IMG>".to_vec(),
            end: b"<END>".to_vec(),
        };
        for step in [1, 4, stream.len()] {
            let (got, _) = cut(detection.clone(), &stream, step);
            assert_eq!(
                got,
                [
                    (ImageFormat::Png, png(0x77)),
                    (ImageFormat::Other, b"de".to_vec())
                ]
            );
        }
        // A JPEG's own start and end as the markers: the whole is the picture.
        let mut stream = b"telemetry\n".to_vec();
        stream.extend(jpeg(0x12));
        let detection = Detection::Markers {
            start: vec![0xFF, 0xD8],
            end: vec![0xFF, 0xD9],
        };
        let (got, _) = cut(detection, &stream, 3);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, ImageFormat::Jpeg);
        assert!(jpeg(0x12).starts_with(&got[0].1) && got[0].1.ends_with(&[0xFF, 0xD9]));
    }

    #[test]
    fn a_broken_or_oversized_image_is_counted_and_the_next_one_still_comes_out() {
        // A JPEG broken off after its first segment, then a whole one.
        let mut stream = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 1, 2, b'x', b'y'];
        stream.extend(jpeg(0x55));
        let (got, broken) = cut(Detection::Auto, &stream, 5);
        assert_eq!(got, [(ImageFormat::Jpeg, jpeg(0x55))]);
        assert_eq!(broken, 1);

        // A PNG whose IDAT claims more than the cap, then a small PNG.
        let mut big = PNG_SIGNATURE.to_vec();
        big.extend(100_000u32.to_be_bytes());
        big.extend(b"IDAT");
        big.extend(vec![0u8; 5000]);
        big.extend(png(0x66));
        let (got, broken) = cut(Detection::Auto, &big, 100);
        assert_eq!(got, [(ImageFormat::Png, png(0x66))]);
        assert!(broken >= 1);

        // Endless bytes after a start with no end: the buffer never passes the cap.
        let mut cutter = ImageCutter::new(
            Detection::Markers {
                start: b"S".to_vec(),
                end: b"E".to_vec(),
            },
            1000,
        );
        for _ in 0..100 {
            cutter.push(b"S0123456789abcdef0123456789", |_, _| {
                panic!("no end was sent")
            });
            assert!(cutter.buf.len() <= 1000 + 27);
        }
        assert!(cutter.broken() > 0);
    }
}
