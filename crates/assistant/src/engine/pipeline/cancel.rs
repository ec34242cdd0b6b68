//! A small cancellation signal: a flag plus a wake-up, with children that are cancelled
//! along with their parent. An execute wrapper may hand the tool a child (say, one it
//! cancels on a timeout) instead of the caller's signal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Notify;

#[derive(Debug, Default)]
struct Inner {
    cancelled: AtomicBool,
    notify: Notify,
    children: Mutex<Vec<Weak<Inner>>>,
}

impl Inner {
    fn cancel(&self) {
        if self.cancelled.swap(true, Ordering::SeqCst) {
            return;
        }
        self.notify.notify_waiters();
        let children =
            std::mem::take(&mut *self.children.lock().unwrap_or_else(|e| e.into_inner()));
        for child in children.iter().filter_map(Weak::upgrade) {
            child.cancel();
        }
    }
}

/// Cloneable; all clones share one signal.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<Inner>);

impl CancelToken {
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// A token cancelled when this one is, and also cancellable on its own.
    pub fn child(&self) -> CancelToken {
        let child = CancelToken::new();
        self.0
            .children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::downgrade(&child.0));
        // Cancelled in between: the loop in `cancel` may have taken the list already.
        if self.is_cancelled() {
            child.cancel();
        }
        child
    }

    pub fn cancel(&self) {
        self.0.cancel();
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
    }

    /// Completes once cancelled.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}
