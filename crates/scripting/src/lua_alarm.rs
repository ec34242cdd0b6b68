//! How the watchdog stops a Lua call that runs past its deadline, without a debug hook on
//! the calls that finish in time.
//!
//! Why: with any count hook set, Lua 5.4 enters its hook dispatch (`luaG_traceexec`) before
//! every instruction and `rethook` after every return, whatever the count. For a parser of
//! a few microseconds a frame that was a tenth of its time.
//!
//! So no hook is set while calls finish in time. One alarm thread per process looks at the
//! running Lua calls every [`ALARM_PERIOD`]. When one is past its deadline, it sends the
//! thread running it a signal, and the handler sets a count hook on the state that thread is
//! running – what `lua.c` does on Ctrl-C; `lua_sethook` is made to be called from a signal
//! handler. The hook raises the timeout, and stays on, every [`HOOK_INTERVAL`] instructions,
//! until the call ends, so a script's `pcall` cannot outrun it. A call whose deadline has
//! passed when it starts (a run's shared deadline) gets the hook from its own thread.
//!
//! Invariants:
//! - The signal is sent only while the call's thread is inside [`Alarm::run`]: the alarm
//!   thread marks the call `SIGNALLING` before `pthread_kill` and `SIGNALLED` after it, and a
//!   call that ends meanwhile waits for `SIGNALLED` before leaving, so the thread is alive.
//! - The handler touches only the state of the call its thread is running ([`CURRENT`], set
//!   at the start of a call and cleared before its end's handshake), so a signal that lands
//!   late finds no state, or a later call's, whose hook then sees no expired deadline and
//!   removes itself.
//! - Without a free real-time signal or the alarm thread, and off Linux, every state keeps
//!   the count hook on all the time, as before (slower, never unwatched).

use std::cell::Cell;
use std::ffi::c_int;
use std::ptr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::thread;
use std::time::Duration;

use mlua::ffi::{self, lua_Debug, lua_State};

use crate::Watchdog;

/// How often the alarm thread looks at the running calls: at most this late past its
/// deadline is a call stopped (a call's default limit is 500 ms).
const ALARM_PERIOD: Duration = Duration::from_millis(5);

/// Instructions between two looks at the clock once a call has its hook: small enough to
/// stop a loop that catches the timeout within a fraction of a millisecond.
const HOOK_INTERVAL: c_int = 4096;

// The phases of an engine's call, as the alarm thread sees them.
const IDLE: u8 = 0;
const RUNNING: u8 = 1;
const SIGNALLING: u8 = 2;
const SIGNALLED: u8 = 3;

thread_local! {
    /// Whether this thread has made sure the alarm's signal is not blocked for it.
    static UNBLOCKED: Cell<bool> = const { Cell::new(false) };

    /// The state this thread is running a call of, and that call's [`Alarm`]; null between
    /// calls. Read by the signal handler: a `const` thread-local without a destructor is a
    /// plain `#[thread_local]` static, which a handler may read.
    static CURRENT: Cell<(*mut lua_State, *const Alarm)> =
        const { Cell::new((ptr::null_mut(), ptr::null())) };
}

/// One Lua engine's watch: its watchdog, and what the alarm thread needs to interrupt it.
pub(crate) struct Alarm {
    watchdog: Arc<Watchdog>,
    /// The `pthread_t` of the thread running the current call.
    thread: AtomicUsize,
    phase: AtomicU8,
    /// The alarm thread watching this engine; `None`: the state's count hook is on for
    /// good.
    alarms: Option<&'static Alarms>,
    /// `alarms.is_none()`, read by the hook.
    always_hooked: bool,
}

impl Alarm {
    /// Watches the calls of `state`, whose deadlines `watchdog` keeps. Sets the hook for good
    /// when there is no alarm thread to set it when needed.
    ///
    /// # Safety
    /// `state` must be the main state of the engine that owns the returned alarm, and no
    /// other code may set a hook on it.
    pub(crate) unsafe fn watch(state: *mut lua_State, watchdog: Arc<Watchdog>) -> Arc<Alarm> {
        Self::watch_by(state, watchdog, alarms())
    }

    /// [`Alarm::watch`] by the given alarm thread, or by the count hook alone.
    unsafe fn watch_by(
        state: *mut lua_State,
        watchdog: Arc<Watchdog>,
        alarms: Option<&'static Alarms>,
    ) -> Arc<Alarm> {
        let alarm = Arc::new(Alarm {
            watchdog,
            thread: AtomicUsize::new(0),
            phase: AtomicU8::new(IDLE),
            alarms,
            always_hooked: alarms.is_none(),
        });
        match alarms {
            Some(alarms) => alarms.add(&alarm),
            None => ffi::lua_sethook(state, Some(interrupt), ffi::LUA_MASKCOUNT, HOOK_INTERVAL),
        }
        alarm
    }

    /// Runs `call`, which runs Lua code on `state`, as one call under the watchdog (armed by
    /// the caller).
    pub(crate) fn run<R>(&self, state: *mut lua_State, call: impl FnOnce() -> R) -> R {
        if let (Some(alarms), false) = (self.alarms, UNBLOCKED.get()) {
            // A thread that inherited a mask blocking the signal would never be interrupted.
            signal::unblock(alarms.signal);
            UNBLOCKED.set(true);
        }
        let previous = CURRENT.replace((state, self));
        self.thread.store(signal::this_thread(), Ordering::Relaxed);
        self.phase.store(RUNNING, Ordering::Release);
        if !self.always_hooked && self.watchdog.past_deadline() {
            // SAFETY: this thread runs `state`; no Lua code is running on it now.
            unsafe { ffi::lua_sethook(state, Some(interrupt), ffi::LUA_MASKCOUNT, 1) };
        }
        let _end = EndOfCall {
            alarm: self,
            state,
            previous,
        };
        call()
    }

    /// Interrupts the running call if it is past its deadline. Called by the alarm thread.
    fn ring_if_late(&self, signal: c_int) {
        if self.phase.load(Ordering::Acquire) != RUNNING || !self.watchdog.past_deadline() {
            return;
        }
        if self
            .phase
            .compare_exchange(RUNNING, SIGNALLING, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: the thread is alive: it cannot leave `run` until the phase moves on.
            unsafe { signal::send(self.thread.load(Ordering::Relaxed), signal) };
            self.phase.store(SIGNALLED, Ordering::Release);
        }
    }
}

/// Ends a call: the handler no longer sees its state, the alarm thread is done with its
/// thread, and a hook set for it is removed.
struct EndOfCall<'a> {
    alarm: &'a Alarm,
    state: *mut lua_State,
    previous: (*mut lua_State, *const Alarm),
}

impl Drop for EndOfCall<'_> {
    fn drop(&mut self) {
        CURRENT.set(self.previous);
        loop {
            match self.alarm.phase.compare_exchange(
                RUNNING,
                IDLE,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                // The alarm thread is sending the signal: a system call away from done.
                Err(SIGNALLING) => thread::yield_now(),
                Err(_) => {
                    self.alarm.phase.store(IDLE, Ordering::Release);
                    break;
                }
            }
        }
        // SAFETY: this thread runs `state` and no Lua code is running on it now; the
        // handler no longer reaches it (CURRENT was reset above).
        unsafe {
            if !self.alarm.always_hooked && ffi::lua_gethookmask(self.state) != 0 {
                ffi::lua_sethook(self.state, None, 0, 0);
            }
        }
    }
}

/// The count hook: raises the timeout once the running call is past its deadline, and stays
/// on for the rest of the call; otherwise (a signal that landed late) removes itself.
unsafe extern "C-unwind" fn interrupt(state: *mut lua_State, _: *mut lua_Debug) {
    let (running, alarm) = CURRENT.get();
    if alarm.is_null() || running != state {
        ffi::lua_sethook(state, None, 0, 0);
        return;
    }
    let alarm = &*alarm;
    if alarm.watchdog.expired() {
        if !alarm.always_hooked {
            ffi::lua_sethook(state, Some(interrupt), ffi::LUA_MASKCOUNT, HOOK_INTERVAL);
        }
        // The message is not what the caller reports: the watchdog says it was a timeout.
        ffi::luaL_error(state, c"script exceeded its time limit".as_ptr());
    } else if !alarm.always_hooked {
        ffi::lua_sethook(state, None, 0, 0);
    }
}

/// The signal handler: hooks the state this thread is running a call of, if any.
extern "C" fn on_signal(_: c_int) {
    let (state, _) = CURRENT.get();
    if !state.is_null() {
        // SAFETY: `state` is the running call's (see CURRENT); `lua_sethook` may be called
        // from a signal handler.
        unsafe { ffi::lua_sethook(state, Some(interrupt), ffi::LUA_MASKCOUNT, 1) };
    }
}

/// The alarm thread's list of engines, and the signal it sends.
struct Alarms {
    engines: Mutex<Vec<Weak<Alarm>>>,
    added: Condvar,
    signal: c_int,
}

impl Alarms {
    fn add(&self, alarm: &Arc<Alarm>) {
        let mut engines = self.engines.lock().unwrap_or_else(|e| e.into_inner());
        engines.push(Arc::downgrade(alarm));
        self.added.notify_one();
    }

    fn watch_forever(&self) {
        let mut engines = self.engines.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            engines.retain(|engine| engine.strong_count() > 0);
            if engines.is_empty() {
                // Asleep until an engine is made.
                engines = self.added.wait(engines).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            let alive: Vec<Arc<Alarm>> = engines.iter().filter_map(Weak::upgrade).collect();
            drop(engines);
            for alarm in &alive {
                alarm.ring_if_late(self.signal);
            }
            drop(alive);
            thread::sleep(ALARM_PERIOD);
            engines = self.engines.lock().unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The process's alarm thread, started with the first Lua engine; `None` when no signal
/// could be set aside for it or the thread could not start.
fn alarms() -> Option<&'static Alarms> {
    static ALARMS: OnceLock<Option<&'static Alarms>> = OnceLock::new();
    *ALARMS.get_or_init(|| {
        let signal = free_signal()?;
        let alarms: &'static Alarms = Box::leak(Box::new(Alarms {
            engines: Mutex::new(Vec::new()),
            added: Condvar::new(),
            signal,
        }));
        let started = thread::Builder::new()
            .name("lua-watchdog".into())
            .spawn(move || alarms.watch_forever());
        match started {
            Ok(_) => Some(alarms),
            Err(error) => {
                tracing::warn!(%error, "no Lua watchdog thread; Lua calls are watched by a count hook");
                None
            }
        }
    })
}

/// The operating system's part: threads and real-time signals. Linux has them; elsewhere
/// no signal is found, and every Lua state keeps its count hook.
#[cfg(target_os = "linux")]
mod signal {
    use std::ffi::c_int;
    use std::mem;
    use std::ptr;

    /// This thread, as `pthread_kill` names it.
    pub(super) fn this_thread() -> usize {
        // SAFETY: `pthread_self` has no preconditions.
        unsafe { libc::pthread_self() as usize }
    }

    /// Sends `signal` to `thread`.
    ///
    /// # Safety
    /// `thread` must be a thread that is still running.
    pub(super) unsafe fn send(thread: usize, signal: c_int) {
        libc::pthread_kill(thread as libc::pthread_t, signal);
    }

    /// Lets `signal` through to this thread.
    pub(super) fn unblock(signal: c_int) {
        // SAFETY: changes only this thread's mask, adding nothing to it.
        unsafe {
            let mut set: libc::sigset_t = mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, ptr::null_mut());
        }
    }

    /// Installs `handler` on the highest real-time signal nobody handles yet.
    pub(super) fn install(handler: extern "C" fn(c_int)) -> Option<c_int> {
        for signal in (libc::SIGRTMIN()..=libc::SIGRTMAX()).rev() {
            // SAFETY: plain sigaction calls on zeroed structs; the handler is
            // async-signal-safe.
            unsafe {
                let mut old: libc::sigaction = mem::zeroed();
                if libc::sigaction(signal, ptr::null(), &mut old) != 0
                    || old.sa_sigaction != libc::SIG_DFL
                {
                    continue;
                }
                let mut action: libc::sigaction = mem::zeroed();
                action.sa_sigaction = handler as libc::sighandler_t;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                if libc::sigaction(signal, &action, ptr::null_mut()) == 0 {
                    return Some(signal);
                }
            }
        }
        None
    }
}

#[cfg(not(target_os = "linux"))]
mod signal {
    use std::ffi::c_int;

    pub(super) fn this_thread() -> usize {
        0
    }

    /// Never called: without [`install`] there is no alarm thread.
    pub(super) unsafe fn send(_: usize, _: c_int) {}

    pub(super) fn unblock(_: c_int) {}

    pub(super) fn install(_: extern "C" fn(c_int)) -> Option<c_int> {
        None
    }
}

/// Installs [`on_signal`] on a signal of the alarm's own.
fn free_signal() -> Option<c_int> {
    let signal = signal::install(on_signal);
    if signal.is_none() {
        tracing::warn!("no free real-time signal; Lua calls are watched by a count hook");
    }
    signal
}

#[cfg(test)]
mod tests {
    use std::mem;
    use std::time::Instant;

    use mlua::Lua;

    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn the_alarm_thread_starts_with_a_signal_of_its_own() {
        let alarms = alarms().expect("this machine has real-time signals and threads");
        assert!((libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&alarms.signal));
        // SAFETY: reading a disposition.
        let handler = unsafe {
            let mut old: libc::sigaction = mem::zeroed();
            libc::sigaction(alarms.signal, ptr::null(), &mut old);
            old.sa_sigaction
        };
        assert_eq!(
            handler,
            on_signal as extern "C" fn(c_int) as libc::sighandler_t
        );
    }

    /// A plain Lua state (stock libraries) under a watchdog.
    struct Watched {
        lua: Lua,
        state: *mut lua_State,
        watchdog: Arc<Watchdog>,
        alarm: Arc<Alarm>,
    }

    impl Watched {
        /// Watched by the alarm thread or, with `None`, by the count hook alone.
        fn new(alarms: Option<&'static Alarms>) -> Self {
            let lua = Lua::new();
            let mut state = ptr::null_mut();
            // SAFETY: only reads the pointer.
            unsafe { lua.exec_raw::<()>((), |s| state = s) }.unwrap();
            let watchdog = Watchdog::new();
            // SAFETY: the main state of `lua`, which sets no hooks of its own.
            let alarm = unsafe { Alarm::watch_by(state, Arc::clone(&watchdog), alarms) };
            Watched {
                lua,
                state,
                watchdog,
                alarm,
            }
        }

        /// Runs `code` as one call with `timeout`.
        fn call(&self, code: &str, timeout: Duration) -> mlua::Result<()> {
            self.watchdog.arm(timeout);
            let result = self.alarm.run(self.state, || self.lua.load(code).exec());
            self.watchdog.disarm();
            result
        }

        /// A call that needs no watchdog: it must run to its end.
        fn short_call(&self) {
            self.call(
                "local x = 0 for i = 1, 1e4 do x = x + i end",
                Duration::from_secs(20),
            )
            .unwrap();
            assert!(!self.watchdog.tripped());
        }

        fn hook_mask(&self) -> c_int {
            // SAFETY: no call is running on the state.
            unsafe { ffi::lua_gethookmask(self.state) }
        }
    }

    const RUNAWAYS: &[&str] = &[
        "while true do end",
        "local i = 0 while true do i = i + 1 end",
        "local function f(x) return x end while true do f(1) end",
        "while true do local t = { 1, 2, 3 } end",
        "local s = 0 for i = 1, math.huge do s = s + i end",
        "for _ in ('a,b,'):rep(1e7):gmatch('[^,]+') do end",
        "local function deep(n) if n > 100 then return 0 end return deep(n + 1) end while true do deep(0) end",
        "repeat local s = tostring(math.random()) until false",
    ];

    /// Whether a runaway call was stopped by the watchdog; the bound on the wait is only
    /// there so that a regression fails instead of hanging.
    fn stopped(watched: &Watched, code: &str, timeout: Duration) -> bool {
        let started = Instant::now();
        let result = watched.call(code, timeout);
        assert!(started.elapsed() < Duration::from_secs(20), "{code}");
        result.is_err() && watched.watchdog.tripped()
    }

    #[test]
    fn runaway_loops_are_stopped_and_leave_no_hook() {
        for alarms in [alarms(), None] {
            let watched = Watched::new(alarms);
            let permanent = if alarms.is_some() {
                0
            } else {
                ffi::LUA_MASKCOUNT
            };
            for code in RUNAWAYS {
                assert!(stopped(&watched, code, Duration::from_millis(20)), "{code}");
                assert_eq!(
                    watched.hook_mask(),
                    permanent,
                    "{code}: hook after the call"
                );
                watched.short_call();
            }
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_that_blocks_every_signal_is_still_stopped() {
        let (done, outcome) = std::sync::mpsc::channel();
        thread::spawn(move || {
            // SAFETY: changes only this thread's mask.
            unsafe {
                let mut all: libc::sigset_t = mem::zeroed();
                libc::sigfillset(&mut all);
                libc::pthread_sigmask(libc::SIG_BLOCK, &all, ptr::null_mut());
            }
            let watched = Watched::new(alarms());
            let result = watched.call("while true do end", Duration::from_millis(20));
            done.send(result.is_err() && watched.watchdog.tripped())
                .unwrap();
        });
        // Waited for with a bound, so a thread the signal never reaches fails the test
        // rather than hanging it.
        let stopped = outcome.recv_timeout(Duration::from_secs(30));
        assert_eq!(stopped, Ok(true), "the loop was not stopped");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_call_past_its_deadline_when_it_starts_is_stopped_at_once() {
        let watched = Watched::new(alarms());
        assert!(stopped(&watched, "while true do end", Duration::ZERO));
        assert_eq!(watched.hook_mask(), 0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn calls_that_race_their_deadlines_end_one_way_or_the_other() {
        // Calls from none to many times their limit, on two threads at once: each either
        // finishes or is stopped by the watchdog, and no hook or signal from one call
        // stops the next, which has all the time it needs. The longer half runs past the
        // limit by more than the alarm's period (a loop of 1.2 M steps or more takes
        // 6 ms even in an optimised build), so the alarm must stop some.
        let racers: Vec<_> = (0..2)
            .map(|seed| {
                thread::spawn(move || {
                    let watched = Watched::new(alarms());
                    let (mut finished, mut stopped) = (0, 0);
                    for i in 0..150u64 {
                        let spin = (i * 7 + seed) % 13;
                        let code = format!("for _ = 1, {spin} * 2e5 do end");
                        match watched.call(&code, Duration::from_millis(1)) {
                            Ok(()) => finished += 1,
                            Err(e) => {
                                assert!(watched.watchdog.tripped(), "{e}");
                                stopped += 1;
                            }
                        }
                        watched.short_call();
                        assert_eq!(watched.hook_mask(), 0);
                    }
                    (finished, stopped)
                })
            })
            .collect();
        for racer in racers {
            let (finished, stopped) = racer.join().unwrap();
            assert_eq!(finished + stopped, 150);
            assert!(stopped > 0, "no call ran late: the race was not run");
        }
    }
}
