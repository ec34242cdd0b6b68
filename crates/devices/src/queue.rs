//! The bounded queues chunks and rows travel through – a source to the wiring, the wiring
//! to the pipeline thread, the wiring to the capture writer, a live CSV export to its
//! writer – capped in items *and* in bytes.
//!
//! A cap on items alone bounds nothing useful: a queue of 8 192 chunks holds 200 KiB of
//! CAN frames or 800 MiB of 100 KiB serial reads. Each queue here also holds at most a
//! number of bytes; an item past either cap is refused and the producer drops and counts
//! it, as before. An empty queue takes any one item, so a chunk larger than the byte cap
//! is delayed by nothing and dropped only behind others.
//!
//! Bytes are given back when the consumer receives an item: from then on it is the
//! consumer's, counted by whatever queue it is put in next. The consumer also watches
//! what the queue holds each time it asks for more ([`sextant_heap::Backlog`]): once a
//! large backlog has drained, the memory its items took is given back to the system
//! rather than kept for the rest of the run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use sextant_heap::Backlog;
use sextant_telemetry::{Chunk, Timestamp, Value};
use tokio::sync::mpsc;

/// Why [`Receiver::try_recv`] had nothing: the queue is empty, or empty with every sender
/// gone.
pub use tokio::sync::mpsc::error::TryRecvError;

/// What an item holds, as counted against a queue's byte cap.
pub trait Weigh {
    fn weight(&self) -> usize;
}

impl Weigh for Chunk {
    fn weight(&self) -> usize {
        std::mem::size_of::<Chunk>() + self.data.len()
    }
}

impl Weigh for (usize, Chunk) {
    fn weight(&self) -> usize {
        self.1.weight()
    }
}

impl Weigh for (u16, Timestamp, Bytes) {
    fn weight(&self) -> usize {
        std::mem::size_of::<Self>() + self.2.len()
    }
}

/// A row of a live CSV export: its time and values.
impl Weigh for (u64, Vec<Value>) {
    fn weight(&self) -> usize {
        let texts: usize = self
            .1
            .iter()
            .map(|v| match v {
                Value::Text(t) => t.len(),
                _ => 0,
            })
            .sum();
        std::mem::size_of::<Self>() + self.1.len() * std::mem::size_of::<Value>() + texts
    }
}

/// Bytes in a queue, and its cap.
#[derive(Debug)]
struct Budget {
    held: AtomicUsize,
    max: usize,
}

/// A queue holding at most `items` items and `bytes` bytes.
pub fn bounded<T: Weigh>(items: usize, bytes: usize) -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = mpsc::channel(items.max(1));
    let budget = Arc::new(Budget {
        held: AtomicUsize::new(0),
        max: bytes.max(1),
    });
    (
        Sender {
            tx,
            budget: budget.clone(),
        },
        Receiver {
            rx,
            budget,
            backlog: Backlog::new(),
        },
    )
}

/// Why [`Sender::try_send`] gave the item back.
#[derive(Debug, PartialEq, Eq)]
pub enum TrySendError<T> {
    /// The queue holds its cap of items or bytes: drop the item and count it.
    Full(T),
    /// Nobody receives any more.
    Closed(T),
}

/// The producing end; cheap to clone.
#[derive(Debug)]
pub struct Sender<T> {
    tx: mpsc::Sender<T>,
    budget: Arc<Budget>,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender {
            tx: self.tx.clone(),
            budget: self.budget.clone(),
        }
    }
}

impl<T: Weigh> Sender<T> {
    /// Queues `item` if both caps have room for it; never waits.
    pub fn try_send(&self, item: T) -> Result<(), TrySendError<T>> {
        let weight = item.weight();
        let before = self.budget.held.fetch_add(weight, Ordering::AcqRel);
        if before != 0 && before + weight > self.budget.max {
            self.budget.held.fetch_sub(weight, Ordering::AcqRel);
            return Err(TrySendError::Full(item));
        }
        self.tx.try_send(item).map_err(|e| {
            self.budget.held.fetch_sub(weight, Ordering::AcqRel);
            match e {
                mpsc::error::TrySendError::Full(item) => TrySendError::Full(item),
                mpsc::error::TrySendError::Closed(item) => TrySendError::Closed(item),
            }
        })
    }

    /// Whether the receiving end is gone.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// The consuming end.
#[derive(Debug)]
pub struct Receiver<T> {
    rx: mpsc::Receiver<T>,
    budget: Arc<Budget>,
    backlog: Backlog,
}

impl<T: Weigh> Receiver<T> {
    fn taken(&self, item: T) -> T {
        self.budget.held.fetch_sub(item.weight(), Ordering::AcqRel);
        item
    }

    /// Reports what is queued as the consumer comes back for more: by then it is done
    /// with the item before (written, freed, its buffers pooled or let go of), so a
    /// backlog found drained here is one whose memory is free to give back.
    fn asking(&mut self) {
        self.backlog
            .observe(self.budget.held.load(Ordering::Acquire));
    }

    /// The next item; `None` once every sender is gone and the queue is empty.
    pub async fn recv(&mut self) -> Option<T> {
        self.asking();
        let item = self.rx.recv().await?;
        Some(self.taken(item))
    }

    /// [`Receiver::recv`] for a thread outside the async runtime.
    pub fn blocking_recv(&mut self) -> Option<T> {
        self.asking();
        let item = self.rx.blocking_recv()?;
        Some(self.taken(item))
    }

    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        self.asking();
        let item = self.rx.try_recv()?;
        Ok(self.taken(item))
    }

    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// Items queued.
    pub fn len(&self) -> usize {
        self.rx.len()
    }

    /// Bytes queued.
    pub fn bytes(&self) -> usize {
        self.budget.held.load(Ordering::Acquire)
    }

    /// Refuses new items; those queued can still be received.
    pub fn close(&mut self) {
        self.rx.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(len: usize) -> Chunk {
        Chunk {
            data: Bytes::from(vec![7u8; len]),
            timestamp: Timestamp::default(),
        }
    }

    /// Rows of what a queue takes: (items cap, bytes cap, chunk sizes offered in turn,
    /// which of them it takes), nothing received in between.
    #[test]
    fn a_queue_refuses_past_either_cap() {
        let overhead = std::mem::size_of::<Chunk>();
        let cases: &[(usize, usize, &[usize], &[bool])] = &[
            // The item cap.
            (2, 1 << 20, &[10, 10, 10], &[true, true, false]),
            // The byte cap: three small chunks fit where one more does not.
            (
                100,
                3 * (overhead + 100),
                &[100, 100, 100, 1],
                &[true, true, true, false],
            ),
            // An empty queue takes a chunk bigger than its byte cap; the next waits behind.
            (100, 1000, &[1 << 20, 1], &[true, false]),
            // Big reads fill the byte cap long before the item cap.
            (
                8192,
                4 * (overhead + 100 * 1024),
                &[102_400, 102_400, 102_400, 102_400, 102_400],
                &[true, true, true, true, false],
            ),
        ];
        for (row, &(items, bytes, sizes, taken)) in cases.iter().enumerate() {
            let (tx, rx) = bounded::<Chunk>(items, bytes);
            let got: Vec<bool> = sizes
                .iter()
                .map(|&n| match tx.try_send(chunk(n)) {
                    Ok(()) => true,
                    Err(TrySendError::Full(c)) => {
                        assert_eq!(c.data.len(), n, "row {row}: the refused chunk comes back");
                        false
                    }
                    Err(TrySendError::Closed(_)) => panic!("row {row}: closed"),
                })
                .collect();
            assert_eq!(got, taken, "row {row}");
            let held: usize = sizes
                .iter()
                .zip(taken)
                .filter(|(_, &t)| t)
                .map(|(&n, _)| overhead + n)
                .sum();
            assert_eq!(rx.bytes(), held, "row {row}");
        }
    }

    #[test]
    fn receiving_gives_the_bytes_back() {
        let (tx, mut rx) = bounded::<Chunk>(100, 2 * (std::mem::size_of::<Chunk>() + 1000));
        assert!(tx.try_send(chunk(1000)).is_ok());
        assert!(tx.try_send(chunk(1000)).is_ok());
        assert!(matches!(
            tx.try_send(chunk(1000)),
            Err(TrySendError::Full(_))
        ));
        assert_eq!(rx.try_recv().unwrap().data.len(), 1000);
        assert!(tx.try_send(chunk(1000)).is_ok(), "room again");
        while rx.try_recv().is_ok() {}
        assert_eq!(rx.bytes(), 0);
        drop(rx);
        assert!(matches!(
            tx.try_send(chunk(1)),
            Err(TrySendError::Closed(_))
        ));
    }
}
