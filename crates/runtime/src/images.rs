//! The image views of a live run: each image group's pictures cut out of its source's raw
//! bytes on the pipeline thread (`telemetry::images`), the newest kept for
//! `dashboard.image`, with how many arrived, how fast and how many were broken.
//!
//! Only the newest picture of each view is kept: the page asks for it at its own pace (at
//! most ten times a second), so a camera faster than the page costs a copy per picture and
//! nothing more. A picture larger than [`MAX_IMAGE_BYTES`] is dropped and counted.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use sextant_devices::wiring::FrameSink;
use sextant_telemetry::images::{Detection, ImageCutter, ImageFormat, MAX_IMAGE_BYTES};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::project::{GroupWidget, ImageDetection, Project};
use sextant_telemetry::FrameEvent;

/// Numbers pictures across every view and run of the process, so a page's `after` from an
/// earlier run can never name a picture of this one.
static NEXT_SEQ: AtomicU64 = AtomicU64::new(1);

/// The window the frame rate is measured over.
const RATE_WINDOW: Duration = Duration::from_secs(2);

/// What one image view holds now.
#[derive(Debug, Clone, Default)]
pub struct Latest {
    /// Names the newest picture (unique in the process; 0 before the first): a page that
    /// has seen `seq` need not fetch it again.
    pub seq: u64,
    pub picture: Option<(ImageFormat, Bytes)>,
    /// Pictures cut whole, and started but broken off or over the cap.
    pub frames: u64,
    pub broken: u64,
    /// Pictures a second over the last [`RATE_WINDOW`].
    pub rate_hz: f64,
    /// When the newest arrived.
    pub at: Option<Instant>,
}

/// Every image view of a run, by group id; shared by the pipeline thread and the commands.
#[derive(Clone, Default)]
pub struct ImageViews {
    views: Arc<Mutex<Vec<View>>>,
}

struct View {
    group: String,
    source: usize,
    cutter: ImageCutter,
    latest: Latest,
    arrivals: VecDeque<Instant>,
}

impl ImageViews {
    /// The image views `project` asks for; a group whose stream settings do not make sense
    /// (the project validates them) reads by magic bytes.
    pub fn of(project: &Project) -> ImageViews {
        let views = project
            .groups
            .iter()
            .filter(|g| g.widget == GroupWidget::Image)
            .map(|g| {
                let stream = g.image.clone().unwrap_or_default();
                let source = stream
                    .source
                    .as_deref()
                    .and_then(|id| project.sources.iter().position(|s| s.id == id))
                    .unwrap_or(0);
                let markers = || {
                    let start = sextant_telemetry::framing::parse_hex_bytes(&stream.start).ok()?;
                    let end = sextant_telemetry::framing::parse_hex_bytes(&stream.end).ok()?;
                    (!start.is_empty() && !end.is_empty())
                        .then_some(Detection::Markers { start, end })
                };
                let detection = match stream.detection {
                    ImageDetection::Markers => markers().unwrap_or(Detection::Auto),
                    ImageDetection::Auto => Detection::Auto,
                };
                View {
                    group: g.id.clone(),
                    source,
                    cutter: ImageCutter::new(detection, MAX_IMAGE_BYTES),
                    latest: Latest::default(),
                    arrivals: VecDeque::new(),
                }
            })
            .collect();
        ImageViews {
            views: Arc::new(Mutex::new(views)),
        }
    }

    /// Whether the run has any image view (else no sink is needed).
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The image view of `group` now; `None` when the run has no such view.
    pub fn latest(&self, group: &str) -> Option<Latest> {
        let mut views = self.lock();
        let view = views.iter_mut().find(|v| v.group == group)?;
        view.latest.rate_hz = rate(&mut view.arrivals, Instant::now());
        Some(view.latest.clone())
    }

    pub fn sink(&self) -> ImageSink {
        ImageSink {
            views: self.clone(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<View>> {
        self.views.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Pictures a second among `arrivals`, forgetting those older than the window.
fn rate(arrivals: &mut VecDeque<Instant>, now: Instant) -> f64 {
    while arrivals
        .front()
        .is_some_and(|t| now.duration_since(*t) > RATE_WINDOW)
    {
        arrivals.pop_front();
    }
    arrivals.len() as f64 / RATE_WINDOW.as_secs_f64()
}

/// Feeds each image view the raw chunks of its source, on the pipeline thread.
pub struct ImageSink {
    views: ImageViews,
}

impl FrameSink for ImageSink {
    fn chunk(&mut self, source: usize, chunk: &sextant_telemetry::Chunk) {
        let mut views = self.views.lock();
        for view in views.iter_mut().filter(|v| v.source == source) {
            let View {
                cutter,
                latest,
                arrivals,
                ..
            } = view;
            cutter.push(&chunk.data, |format, bytes| {
                let now = Instant::now();
                latest.seq = NEXT_SEQ.fetch_add(1, Ordering::Relaxed);
                latest.frames += 1;
                latest.picture = Some((format, Bytes::copy_from_slice(bytes)));
                latest.at = Some(now);
                arrivals.push_back(now);
                rate(arrivals, now);
            });
            latest.broken = cutter.broken();
        }
    }

    fn frame(&mut self, _: &FrameEvent<'_>, _: &[DatasetInfo]) {}
}
