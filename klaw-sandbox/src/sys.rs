//! The `unsafe` calls, each with its safety argument.
#![allow(unsafe_code)]

use std::os::unix::process::CommandExt;

/// Makes `cmd`'s child close every file descriptor above 2 when it runs its program:
/// only stdin, stdout and stderr (as `cmd` sets them up) reach the program.
///
/// Uses `close_range(3, ~0, CLOSE_RANGE_CLOEXEC)` (Linux 5.11), falling back to marking
/// each descriptor below the `RLIMIT_NOFILE` limit close-on-exec one by one. Marking
/// rather than closing keeps the pipe through which the standard library reports a
/// failed `exec` working until the `exec` itself.
pub fn close_inherited_fds(cmd: &mut std::process::Command) {
    // Read before the fork: after it only async-signal-safe calls are allowed.
    let limit = fd_limit();
    // SAFETY: the closure runs in the forked child before `exec`, where only
    // async-signal-safe functions may be called: it makes raw `close_range` and `fcntl`
    // system calls, allocates nothing and takes no lock. Marking descriptors
    // close-on-exec invalidates no descriptor the child still uses before `exec` (the
    // standard library's error pipe is close-on-exec already).
    unsafe {
        cmd.pre_exec(move || {
            cloexec_from_3(limit);
            Ok(())
        });
    }
}

/// Gives back to the system the memory the C allocator holds free inside its heaps
/// (glibc's `malloc_trim(0)`: every arena, free pages in the middle of a heap as well as
/// at its top), and says whether any was given back. glibc otherwise keeps what a burst
/// of work freed for as long as the process lives. False without glibc (musl gives
/// free pages back by itself).
pub fn release_free_memory() -> bool {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: `malloc_trim` takes each arena's lock itself, may be called from any
        // thread at any time, and only advises the kernel about pages no allocation
        // holds; it takes no pointer.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        false
    }
}

/// Marks every file descriptor of this process above 2 close-on-exec, so that no
/// program it starts from now on inherits one it did not set up explicitly (a
/// descriptor created later without close-on-exec is passed on as usual).
///
/// For a process that starts commands itself, such as the sandbox helper: call it first
/// thing. It changes no descriptor number and closes nothing this process uses.
pub fn close_inherited_fds_on_exec() {
    // SAFETY: `cloexec_from_3` only changes descriptor flags; no descriptor is closed
    // or invalidated, so no owner of one in this process is affected.
    unsafe { cloexec_from_3(fd_limit()) }
}

/// Marks descriptors 3 and up close-on-exec: `close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`
/// (Linux 5.11), else `fcntl` on each one below `limit`.
///
/// # Safety
/// Async-signal-safe (raw system calls, no allocation, no lock), so it may run in a
/// forked child; it must not run where a descriptor is meant to be inherited.
unsafe fn cloexec_from_3(limit: libc::c_int) {
    // SAFETY: plain system calls on descriptor numbers; the kernel validates them.
    unsafe {
        let all = libc::c_uint::MAX;
        if libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            all,
            libc::CLOSE_RANGE_CLOEXEC,
        ) == 0
        {
            return;
        }
        for fd in 3..limit {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// The highest descriptor number this process may hold plus one, capped at 2^20 so the
/// fallback loop stays short when the limit is "unlimited".
fn fd_limit() -> libc::c_int {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes one `rlimit` into the valid, exclusively borrowed `r`.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0;
    let cur = if ok { r.rlim_cur } else { 1 << 16 };
    libc::c_int::try_from(cur.min(1 << 20)).unwrap_or(1 << 20)
}

/// Makes `cmd`'s child run `restrict` after the fork, right before `exec`: the
/// supervisor's `Prepared::apply` (Landlock, seccomp, the capability drop and, as root,
/// the switch to the unprivileged user), which must only make system calls, as the
/// `restrict` of [`spawn_restricted`]. With `probe`, the child exits with 0 once they
/// are applied instead of running the program.
pub(crate) fn restrict_before_exec(
    cmd: &mut std::process::Command,
    mut restrict: impl FnMut() -> std::io::Result<()> + Send + Sync + 'static,
    probe: bool,
) {
    // SAFETY: the closure runs in the forked child before `exec`, where only
    // async-signal-safe functions may be called. `restrict` (its one caller's
    // `Prepared::apply`, in the supervisor's probe) only makes system
    // calls (`setgroups`/`setresgid`/`setresuid`, `prctl`, `openat2`, `fchdir`,
    // `landlock_restrict_self`, `seccomp`, `capset`, `write`, `close`) on memory and
    // descriptors made before the fork; it allocates nothing and takes no lock. `_exit`
    // is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            restrict()?;
            if probe {
                libc::_exit(0);
            }
            Ok(())
        });
    }
}

/// A program to run as `std::process::Command` would run it (`execvp`: the `PATH`
/// search, a file without `#!` run by `/bin/sh`), made ready before the child starts:
/// every string and table it needs, so the child only makes system calls.
pub(crate) struct Exec {
    /// The paths to try, in order: the program itself if it holds a `/`, else each
    /// directory of the command's `PATH` (`/bin:/usr/bin` without one) with it.
    candidates: Vec<std::ffi::CString>,
    /// `argv` (the strings are held by `_strings`), ending in a null pointer.
    argv: Vec<*const libc::c_char>,
    /// `/bin/sh`, the candidate (set in the child), `argv[1..]`, null: for a file the
    /// kernel cannot run (`ENOEXEC`), as `execvp` does.
    sh_argv: Vec<*const libc::c_char>,
    /// The environment, ending in a null pointer (`None`: this process's).
    envp: Option<Vec<*const libc::c_char>>,
    cwd: std::ffi::CString,
    stdin: std::os::fd::OwnedFd,
    _strings: Vec<std::ffi::CString>,
}

impl Exec {
    /// `program` with `args`, in `cwd`, with `env` (else this process's environment)
    /// and `stdin` as its standard input.
    pub(crate) fn new(
        program: &std::ffi::OsStr,
        args: impl Iterator<Item = std::ffi::OsString>,
        cwd: &std::path::Path,
        env: Option<&[(std::ffi::OsString, std::ffi::OsString)]>,
        stdin: std::os::fd::OwnedFd,
    ) -> std::io::Result<Exec> {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let c = |b: &[u8]| CString::new(b).map_err(std::io::Error::from);
        let file = program.as_bytes();
        let path = match env {
            Some(env) => env
                .iter()
                .find(|(k, _)| k.as_bytes() == b"PATH")
                .map(|(_, v)| v.as_bytes().to_vec()),
            None => std::env::var_os("PATH").map(|v| v.as_bytes().to_vec()),
        };
        let candidates = if file.is_empty() {
            Vec::new()
        } else if file.contains(&b'/') {
            vec![c(file)?]
        } else {
            path.as_deref()
                .unwrap_or(b"/bin:/usr/bin")
                .split(|b| *b == b':')
                .map(|dir| {
                    // An empty entry is the working directory, as in `execvp`.
                    let mut p = dir.to_vec();
                    if !p.is_empty() {
                        p.push(b'/');
                    }
                    p.extend_from_slice(file);
                    c(&p)
                })
                .collect::<Result<_, _>>()?
        };
        let mut strings = vec![c(file)?];
        for a in args {
            strings.push(c(a.as_bytes())?);
        }
        let argc = strings.len();
        let sh = c(b"/bin/sh")?;
        let mut sh_argv = vec![sh.as_ptr(), std::ptr::null()];
        sh_argv.extend(strings[1..].iter().map(|s| s.as_ptr()));
        sh_argv.push(std::ptr::null());
        strings.push(sh);
        let mut argv: Vec<*const libc::c_char> =
            strings[..argc].iter().map(|s| s.as_ptr()).collect();
        argv.push(std::ptr::null());
        let envp = match env {
            Some(env) => {
                let mut ptrs = Vec::with_capacity(env.len() + 1);
                for (k, v) in env {
                    let mut kv = k.as_bytes().to_vec();
                    kv.push(b'=');
                    kv.extend_from_slice(v.as_bytes());
                    let kv = c(&kv)?;
                    ptrs.push(kv.as_ptr());
                    strings.push(kv);
                }
                ptrs.push(std::ptr::null());
                Some(ptrs)
            }
            None => None,
        };
        Ok(Exec {
            candidates,
            argv,
            sh_argv,
            envp,
            cwd: c(cwd.as_os_str().as_bytes())?,
            stdin,
            _strings: strings,
        })
    }
}

/// What the child of [`spawn_restricted`] reads and writes (in the parent's memory,
/// which it shares until it runs the program or exits).
struct Shared<'a> {
    exec: &'a mut Exec,
    /// The restrictions, applied in the child before the program (system calls only).
    restrict: &'a dyn Fn() -> std::io::Result<()>,
    /// The error that kept the program from running (0: none; the child ran it).
    errno: libc::c_int,
}

/// The size of the stack of [`spawn_restricted`]'s child, a guard page below it.
const CHILD_STACK: usize = 256 * 1024;
const GUARD: usize = 4096;

/// Starts `exec` restricted by `restrict` (`Prepared::apply`, or entering the kept
/// sandbox: see [`spawn_kept`]), as `std::process::Command` with a `pre_exec` hook
/// would, but without copying this
/// process: the child shares its memory (`clone(CLONE_VM | CLONE_VFORK)`, as
/// `posix_spawn` does) until it runs the program, while this thread waits. No page
/// table is copied and no page faults in copy-on-write, in the child or here after it.
/// The child's pid, or why the program did not run (the child has then been reaped).
///
/// Until `exec` the child's memory is this supervisor's, after its switch to the
/// unprivileged user too: the memory is not dumpable (the supervisor made it so; a uid
/// change would too), so no process but root's may trace the child or open its
/// `/proc/<pid>/mem`, and a sandboxed command could not anyway (seccomp denies `ptrace`
/// and `process_vm_*`, Landlock scopes ptrace to its domain); a signal finds every
/// handler at its default, so none runs on the shared memory.
pub(crate) fn spawn_restricted(
    exec: &mut Exec,
    restrict: &dyn Fn() -> std::io::Result<()>,
) -> std::io::Result<rustix::process::Pid> {
    let mut shared = Shared {
        exec,
        restrict,
        errno: 0,
    };
    // SAFETY: the stack is a fresh private mapping (a guard page below it), unmapped
    // only after the child has run the program or exited (CLONE_VFORK suspends this
    // thread until then), so the child never runs on memory that goes away. Every
    // signal is blocked here across the clone, so no handler of this process runs on
    // the child's stack; the child sets every handled signal back to its default
    // before it unblocks them. `child` only makes system calls on `shared`, which
    // lives on this thread's stack until `clone` returns. The mask is restored after.
    unsafe {
        let stack = libc::mmap(
            std::ptr::null_mut(),
            CHILD_STACK + GUARD,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        );
        if stack == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let usable = stack.cast::<u8>().add(GUARD);
        if libc::mprotect(
            usable.cast(),
            CHILD_STACK,
            libc::PROT_READ | libc::PROT_WRITE,
        ) != 0
        {
            let e = std::io::Error::last_os_error();
            libc::munmap(stack, CHILD_STACK + GUARD);
            return Err(e);
        }
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            child,
            usable.add(CHILD_STACK).cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw mut shared).cast(),
        );
        let clone_error = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        libc::munmap(stack, CHILD_STACK + GUARD);
        if pid < 0 {
            return Err(clone_error);
        }
        let errno = std::ptr::read_volatile(&raw const shared.errno);
        if errno != 0 {
            let mut status = 0;
            while libc::waitpid(pid, &mut status, 0) < 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
            {}
            return Err(std::io::Error::from_raw_os_error(errno));
        }
        rustix::process::Pid::from_raw(pid).ok_or_else(|| std::io::Error::other("no pid"))
    }
}

/// The child of [`spawn_restricted`]: signals to their defaults, its standard input,
/// its working directory, the restrictions, then the program; on failure the error in
/// `Shared::errno` and exit 127.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Shared` of `spawn_restricted`, whose thread is suspended
    // until this child runs the program or exits: nothing else touches it meanwhile.
    // Only system calls follow (no allocation, no lock: the memory is the parent's).
    unsafe {
        let shared = &mut *arg.cast::<Shared<'_>>();
        let errno = run_child(shared.exec, shared.restrict);
        std::ptr::write_volatile(&raw mut shared.errno, errno.max(1));
        libc::_exit(127)
    }
}

/// The steps of [`child`]; returns only on failure, with the error number.
///
/// # Safety
/// In the child of [`spawn_restricted`] only.
unsafe fn run_child(exec: &mut Exec, restrict: &dyn Fn() -> std::io::Result<()>) -> libc::c_int {
    use std::os::fd::AsRawFd;
    let last = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    // SAFETY: system calls on memory of this function and of `exec`, made ready before.
    unsafe {
        // Handlers of the parent's would run on memory it shares: back to the defaults
        // (SIGPIPE too, which the Rust runtime ignores, as `std::process` does), then
        // every signal unblocked.
        for sig in 1..65 {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            if sig == libc::SIGPIPE
                || (old.sa_sigaction != libc::SIG_IGN && old.sa_sigaction != libc::SIG_DFL)
            {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &default, std::ptr::null_mut());
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        let stdin = exec.stdin.as_raw_fd();
        if stdin != 0 && libc::dup2(stdin, 0) < 0 {
            return last();
        }
        if libc::chdir(exec.cwd.as_ptr()) != 0 {
            return last();
        }
        if let Err(e) = restrict() {
            return e.raw_os_error().unwrap_or(libc::EPERM);
        }
        let envp = match &exec.envp {
            Some(envp) => envp.as_ptr(),
            None => libc_environ(),
        };
        // `execvp`: each candidate in turn; a missing or unreachable one is skipped,
        // a refused one remembered, any other error ends the search.
        let mut refused = false;
        let mut errno = libc::ENOENT;
        for path in &exec.candidates {
            libc::execve(path.as_ptr(), exec.argv.as_ptr(), envp);
            errno = last();
            if errno == libc::ENOEXEC {
                exec.sh_argv[1] = path.as_ptr();
                libc::execve(exec.sh_argv[0], exec.sh_argv.as_ptr(), envp);
                errno = last();
            }
            match errno {
                libc::EACCES => refused = true,
                libc::ENOENT | libc::ESTALE | libc::ENOTDIR | libc::ENODEV | libc::ETIMEDOUT => {}
                _ => return errno,
            }
        }
        if refused { libc::EACCES } else { errno }
    }
}

/// This process's environment (`environ`).
fn libc_environ() -> *const *const libc::c_char {
    unsafe extern "C" {
        static environ: *const *const libc::c_char;
    }
    // SAFETY: reads the pointer; nothing here changes the environment meanwhile.
    unsafe { environ }
}

/// Whether this kernel gives process file descriptors (`pidfd_open`, Linux 5.3).
pub(crate) fn pidfds_work() -> bool {
    rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    )
    .is_ok()
}

/// A process file descriptor of our child `pid` (readable once it has exited).
pub(crate) fn pidfd(pid: u32) -> std::io::Result<std::os::fd::OwnedFd> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ESRCH))?;
    Ok(rustix::process::pidfd_open(
        pid,
        rustix::process::PidfdFlags::empty(),
    )?)
}

/// Waits until `a` or `b` is readable or hung up; says which are.
pub(crate) fn poll_two(
    a: std::os::fd::BorrowedFd<'_>,
    b: std::os::fd::BorrowedFd<'_>,
) -> std::io::Result<(bool, bool)> {
    use std::os::fd::AsRawFd;
    let entry = |fd: std::os::fd::BorrowedFd<'_>| libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let mut fds = [entry(a), entry(b)];
    // SAFETY: `poll` reads and writes the two valid, exclusively borrowed `pollfd`s; the
    // descriptors are borrowed for the call, so they stay open during it.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let ready = |p: &libc::pollfd| p.revents != 0;
    Ok((ready(&fds[0]), ready(&fds[1])))
}

/// The kernel's Landlock ABI version (`ABI::Unsupported` without Landlock), as the
/// `landlock` crate reads it when it applies a ruleset.
pub(crate) fn landlock_abi() -> landlock::ABI {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: `landlock_create_ruleset(NULL, 0, VERSION)` reads no memory and only
    // returns the ABI version (or an error); it creates no descriptor.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0 as libc::size_t,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    landlock::ABI::from(i32::try_from(v).unwrap_or(-1))
}

/// Moves the calling thread into a new mount namespace (`unshare(CLONE_NEWNS)`).
pub(crate) fn unshare_mount_namespace() -> std::io::Result<()> {
    // SAFETY: a new mount namespace changes what paths resolve to for this thread only;
    // the caller (the single-threaded helper) holds no path-derived state that this
    // invalidates, and it is about to `exec`.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS) }?;
    Ok(())
}

/// Whether this kernel runs system calls of the x32 ABI for this process and its
/// descendants: `getpid` with the x32 bit set answers `ENOSYS` where the kernel has no
/// x32 ABI (or a filter this process already runs under refuses x32 calls that way,
/// for good). Asked once.
#[cfg(target_arch = "x86_64")]
pub(crate) fn x32_calls_run() -> bool {
    static RUNS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *RUNS.get_or_init(|| {
        const X32: libc::c_long = 0x4000_0000;
        // SAFETY: `getpid` takes no argument and touches no memory, whatever the ABI.
        let r = unsafe { libc::syscall(libc::SYS_getpid | X32) };
        !(r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS))
    })
}

/// Refuses to go on when this process has more than one thread: the uid and namespace
/// changes here apply to the calling thread only.
pub(crate) fn single_threaded() -> std::io::Result<()> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse::<u32>().ok());
    match threads {
        Some(1) => Ok(()),
        _ => Err(std::io::Error::other(
            "the sandbox helper must be single-threaded here (a thread would stay root)",
        )),
    }
}

/// Installs `filter` on the calling thread. Only system calls (`prctl`, `seccomp`), no
/// allocation, even on failure: it runs in a forked child before `exec`.
pub(crate) fn install_forked(filter: &seccompiler::BpfProgram) -> std::io::Result<()> {
    seccompiler::apply_filter(filter).map_err(|_| std::io::Error::last_os_error())
}

/// `fork(2)` for the sandbox server (`crate::server`): `None` in the child, the
/// child's id in the parent. Refuses unless this process has one thread.
pub(crate) fn fork_single_threaded() -> std::io::Result<Option<rustix::process::Pid>> {
    single_threaded()?;
    // SAFETY: the process has one thread (checked above; the server makes none), so the
    // child is a full copy in a consistent state: no lock is held by a thread that does
    // not exist in the child, and it may go on running ordinary Rust code.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(std::io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(rustix::process::Pid::from_raw(pid)),
    }
}

/// Makes the next child of this process PID 1 of a new PID namespace
/// (`unshare(CLONE_NEWPID)`; needs `CAP_SYS_ADMIN`).
pub fn children_in_new_pid_namespace() -> std::io::Result<()> {
    // SAFETY: a new PID namespace only changes where this process's future children
    // live; nothing this process holds (its own PID, its threads, its memory) changes.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWPID) }?;
    Ok(())
}

/// A user namespace whose only mapping is `inside -> outside` for both the user and the
/// group id (each pair as `(inside, outside)`), as an open `/proc/<pid>/ns/user`.
///
/// A short-lived child is cloned into the new namespace, its maps are written from
/// here (as root, no `setgroups` change is needed; otherwise `setgroups(2)` is refused
/// in it first, and each map may name only this process's own id), the namespace is
/// opened, and the child is killed (as root reaped at once if it is gone already, else
/// with this process's other children: nothing waits for it to be scheduled; otherwise
/// reaped before this returns).
pub(crate) fn user_namespace(
    uid: (u32, u32),
    gid: (u32, u32),
) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::io::Write;
    let root = rustix::process::geteuid().is_root();
    let (release_read, release_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let read_fd = std::os::fd::AsRawFd::as_raw_fd(&release_read);
    let write_fd = std::os::fd::AsRawFd::as_raw_fd(&release_write);
    // Not root: the child makes itself dumpable (this process may not be), or its
    // `/proc/<pid>` files would be root's and out of this user's reach, and says so on
    // this pipe. Its memory is a copy of this process's, readable meanwhile only by
    // processes of this user that may trace (a sandboxed command may not).
    let (ready_read, ready_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let ready_fd = std::os::fd::AsRawFd::as_raw_fd(&ready_write);
    // SAFETY: a raw `clone` without a new stack acts like `fork`. The child runs only
    // async-signal-safe raw system calls (`prctl`, `write`, `close`, `read`, `_exit`)
    // on memory it already owns, never returns into Rust code, and never touches the
    // parent's state.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        // The child: wait until the parent closes its end (ours is closed first, or
        // the read would never see the end), then leave.
        let mut byte = 0_u8;
        // SAFETY: `prctl` on this process alone, `write` of a valid one-byte buffer,
        // `close` of the child's copies of descriptors, `read` into a valid one-byte
        // buffer, then `_exit`; all async-signal-safe.
        unsafe {
            if !root {
                libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
                libc::write(ready_fd, (&raw const byte).cast(), 1);
            }
            libc::close(ready_fd);
            libc::close(write_fd);
            libc::read(read_fd, (&raw mut byte).cast(), 1);
            libc::_exit(0);
        }
    }
    drop(release_read);
    drop(ready_write);
    let result = (|| {
        let proc = format!("/proc/{pid}");
        if !root {
            let mut byte = [0_u8; 1];
            if rustix::io::read(&ready_read, &mut byte)? != 1 {
                return Err(std::io::Error::other("the namespace's process ended"));
            }
            // Without CAP_SETGID in the parent namespace a group map is written only
            // once `setgroups(2)` is refused in the new one.
            std::fs::File::options()
                .write(true)
                .open(format!("{proc}/setgroups"))?
                .write_all(b"deny")?;
        }
        std::fs::File::options()
            .write(true)
            .open(format!("{proc}/uid_map"))?
            .write_all(format!("{} {} 1\n", uid.0, uid.1).as_bytes())?;
        std::fs::File::options()
            .write(true)
            .open(format!("{proc}/gid_map"))?
            .write_all(format!("{} {} 1\n", gid.0, gid.1).as_bytes())?;
        Ok(std::os::fd::OwnedFd::from(std::fs::File::open(format!(
            "{proc}/ns/user"
        ))?))
    })();
    drop(release_write);
    // The namespace lives on through the descriptor: the child is killed, and reaped
    // now if it is already gone, else later with the helper's other children (the
    // supervisor reaps every one; bubblewrap, which this process may become, reaps
    // children it does not know) instead of waiting here for it to be scheduled.
    // Not root, this is a supervisor or a sandbox server that counts a killed child as
    // a sign of trouble: it is reaped here, which takes only until it is scheduled.
    let pid = libc::pid_t::try_from(pid).unwrap_or(libc::pid_t::MAX);
    let mut status = 0;
    let wait = if root { libc::WNOHANG } else { 0 };
    // SAFETY: signals and reaps the child cloned above, which is not yet reaped, so
    // `pid` is still ours; the status goes into a valid int.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        while libc::waitpid(pid, &mut status, wait) < 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
    result
}

/// `mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, ...)`: makes the detached
/// mount tree `tree` idmapped through `userns` (when given), `nosuid`, `nodev`,
/// read-only with `read_only`, and private (no mount event propagates between it and
/// the host's mounts).
pub(crate) fn idmap_tree(
    tree: std::os::fd::BorrowedFd<'_>,
    userns: Option<std::os::fd::BorrowedFd<'_>>,
    read_only: bool,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    /// `struct mount_attr` (`linux/mount.h`).
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    const MOUNT_ATTR_NOSUID: u64 = 0x2;
    const MOUNT_ATTR_NODEV: u64 = 0x4;
    const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
    const MS_PRIVATE: u64 = 1 << 18;
    let mut attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    if userns.is_some() {
        attr_set |= MOUNT_ATTR_IDMAP;
    }
    if read_only {
        attr_set |= MOUNT_ATTR_RDONLY;
    }
    let attr = MountAttr {
        attr_set,
        attr_clr: 0,
        propagation: MS_PRIVATE,
        userns_fd: userns.map_or(0, |u| u64::try_from(u.as_raw_fd()).unwrap_or(u64::MAX)),
    };
    // SAFETY: `mount_setattr` reads `size_of::<MountAttr>()` bytes from a valid,
    // initialised `struct mount_attr` and an empty NUL-terminated path.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as libc::c_uint,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The user namespace that owns the namespace `ns` (`NS_GET_USERNS`), opened.
pub(crate) fn owning_user_namespace(
    ns: &std::os::fd::OwnedFd,
) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    /// `_IO(0xb7, 0x1)`.
    const NS_GET_USERNS: libc::c_ulong = 0xb701;
    // SAFETY: `NS_GET_USERNS` takes no argument and returns a new descriptor (opened
    // close-on-exec by the kernel) or -1; `ns` is open for the call.
    let fd = unsafe { libc::ioctl(ns.as_raw_fd(), NS_GET_USERNS) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by no one else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// The supervisor's side of entering the server's kept bubblewrap sandbox (see
/// `crate::kept`), before it starts the command (as root, the caller has become the
/// unprivileged user, the sandbox's, first): it joins the sandbox's user namespace (which gives it no
/// capability anywhere else) and makes its next child PID 1 of a new PID namespace
/// owned by that user namespace. It stays in the host's mount and PID namespaces (it
/// reads the host's `/proc` to end the tree), where no command can name it. Call it
/// while this process has one thread.
pub(crate) fn join_kept_user_namespace(ns: &crate::namespaces::Namespaces) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `setns` on a descriptor that is open for the call; this process has one
    // thread (the caller's duty; the kernel refuses otherwise).
    if unsafe { libc::setns(ns.user.as_raw_fd(), libc::CLONE_NEWUSER) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    children_in_new_pid_namespace()
}

/// In the command's process before `exec` (only the system call): joins `userns`, a
/// user namespace this process's user owns ([`user_namespace`]), where it holds every
/// capability until `exec` (`CAP_SETPCAP` among them, which empties the bounding set).
/// Refused where this process shares its filesystem information or has threads.
pub(crate) fn join_own_user_namespace(userns: &std::os::fd::OwnedFd) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `setns` on a descriptor that is open for the call; it changes only this
    // process's credentials.
    if unsafe { libc::setns(userns.as_raw_fd(), libc::CLONE_NEWUSER) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// In a child of the sandbox server: a new network namespace owned by the kept
/// sandbox's user namespace (as root, the caller has become the unprivileged user
/// first), its loopback up,
/// opened. The calling process is left in it: it only sends the descriptor and exits.
pub(crate) fn kept_network_namespace(
    ns: &crate::namespaces::Namespaces,
) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsRawFd;
    // SAFETY: `setns` and `unshare` on a descriptor open for the call and on flags;
    // this process has one thread (a fork of the single-threaded server).
    if unsafe { libc::setns(ns.user.as_raw_fd(), libc::CLONE_NEWUSER) } != 0
        || unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    loopback_up()?;
    Ok(std::fs::File::open("/proc/self/ns/net")?.into())
}

/// Starts `exec` (made with `/` as its working directory: the host's, before it enters
/// anything) as PID 1 of the PID namespace [`join_kept_user_namespace`] made, through
/// [`spawn_restricted`] (its process shares this one's memory until it runs the
/// program): before the program it joins the sandbox's mount, UTS, cgroup and network
/// namespaces (the one `entry` brings, else a new one without network), makes a mount
/// and IPC namespace of its own, mounts its `/proc`, `/tmp`, `/dev/shm` and `/dev/pts`,
/// joins the nested user namespace, changes to `cwd`, starts a session and restricts
/// itself (see `crate::kept`).
pub(crate) fn spawn_kept(
    exec: &mut Exec,
    entry: &crate::namespaces::Entry,
    cwd: &std::ffi::CStr,
) -> std::io::Result<rustix::process::Pid> {
    use std::os::fd::AsRawFd;
    // The supervisor, as a descriptor its child polls once its parent-death signal is
    // set, to know that the supervisor did not die before (PID 1 of its namespace, the
    // child's `getppid` says 0 either way). Close-on-exec: the command never has it.
    let supervisor = rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    )?;
    let fd = supervisor.as_raw_fd();
    // `enter_kept` makes system calls only (`setns`, `unshare`, `socket`, `ioctl`,
    // `setsid`, `mount`, `open_tree`, `mkdir`, `move_mount`, `close`, `chdir`, `capset`,
    // `prctl`, `poll`, `seccomp`, `write`) on memory and descriptors made before, and
    // allocates nothing: what the child of `spawn_restricted` may do.
    spawn_restricted(exec, &|| enter_kept(entry, cwd, fd))
}

/// Writes `what` on stderr (the command's), for a failed step of [`enter_kept`].
fn say(what: &[u8]) {
    let _ = rustix::io::write(rustix::stdio::stderr(), what);
}

/// The step `what` of [`enter_kept`] failed: says so, and returns the error.
fn failed(what: &[u8]) -> std::io::Error {
    let e = std::io::Error::last_os_error();
    say(b"klaw-sandbox: cannot enter the kept sandbox: ");
    say(what);
    say(b"\n");
    e
}

/// Checks a C-style return value (0 on success) of the step `what`.
fn check(r: libc::c_int, what: &[u8]) -> std::io::Result<()> {
    if r == 0 { Ok(()) } else { Err(failed(what)) }
}

/// Brings up the loopback interface of this process's new network namespace, as
/// bubblewrap does for a one-shot command (the kernel gives it 127.0.0.1 and ::1).
/// System calls only, on a request on the stack: it runs in the forked child.
fn loopback_up() -> std::io::Result<()> {
    // SAFETY: `socket` and `close` on integers; `ifreq` is plain data, for which all
    // zeroes is valid; the two `ioctl`s read and write the request, which lives through
    // them; `ifru_flags` is the member `SIOCGIFFLAGS` sets.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(failed(b"bringing up its loopback"));
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (to, from) in request.ifr_name.iter_mut().zip(b"lo") {
            *to = *from as libc::c_char;
        }
        let mut r = libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &raw mut request);
        if r == 0 {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            r = libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &raw mut request);
        }
        let e = (r != 0).then(|| failed(b"bringing up its loopback"));
        libc::close(fd);
        e.map_or(Ok(()), Err)
    }
}

/// `open_tree(2)`: a copy of the mount, detached.
const OPEN_TREE_CLONE: libc::c_uint = 1;
/// `open_tree(2)`: the mounts below too.
const AT_RECURSIVE: libc::c_uint = 0x8000;
/// `move_mount(2)`: the source is the descriptor itself.
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

/// `mount(2)` for a step `what` of [`enter_kept`] (system calls only): `source`,
/// `fstype` and `data` may be absent.
fn mount(
    source: Option<&std::ffi::CStr>,
    target: &std::ffi::CStr,
    fstype: Option<&std::ffi::CStr>,
    flags: libc::c_ulong,
    data: Option<&std::ffi::CStr>,
    what: &[u8],
) -> std::io::Result<()> {
    let ptr = |s: Option<&std::ffi::CStr>| s.map_or(std::ptr::null(), std::ffi::CStr::as_ptr);
    // SAFETY: `mount` reads the NUL-terminated strings (or nothing for a null pointer),
    // which live through the call.
    check(
        unsafe {
            libc::mount(
                ptr(source),
                target.as_ptr(),
                ptr(fstype),
                flags,
                ptr(data).cast(),
            )
        },
        what,
    )
}

/// Makes the bind mount at `path` (in `/proc`) read-only, keeping `/proc`'s flags.
fn read_only(path: &std::ffi::CStr, what: &[u8]) -> std::io::Result<()> {
    let flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | PROC_FLAGS;
    mount(None, path, None, flags, None, what)
}

/// The flags of a `/proc` mount.
const PROC_FLAGS: libc::c_ulong = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;

/// The body of [`enter_kept_before_exec`]'s hook.
fn enter_kept(
    entry: &crate::namespaces::Entry,
    cwd: &std::ffi::CStr,
    supervisor: libc::c_int,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let ns = entry.ns;
    // SAFETY (every block below): plain system calls on integers, descriptors that are
    // open, NUL-terminated strings that live through the call, and (`poll`) one
    // `pollfd` on the stack.
    check(
        unsafe { libc::setns(ns.mnt.as_raw_fd(), libc::CLONE_NEWNS) },
        b"joining its mount namespace",
    )?;
    for (fd, kind) in &ns.others {
        check(
            unsafe { libc::setns(fd.as_raw_fd(), *kind) },
            b"joining its namespaces",
        )?;
    }
    // Without the network, a network namespace of the command's own too: two commands
    // sharing one would meet on its loopback (one taking the other's connections or
    // holding its port). The one the server made for this command, else a new one.
    if let Some(made) = &entry.network {
        check(
            unsafe { libc::setns(made.as_raw_fd(), libc::CLONE_NEWNET) },
            b"joining its network namespace",
        )?;
    }
    let new_net = !ns.network && entry.network.is_none();
    let net = if new_net { libc::CLONE_NEWNET } else { 0 };
    check(
        unsafe { libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWIPC | net) },
        b"making the command's namespaces",
    )?;
    if new_net {
        loopback_up()?;
    }
    if unsafe { libc::setsid() } == -1 {
        return Err(failed(b"setsid"));
    }
    // Nothing mounted here reaches the kept sandbox or another command (bubblewrap's
    // mounts are private already; this does not depend on it).
    let private = libc::MS_REC | libc::MS_PRIVATE;
    mount(
        None,
        c"/",
        None,
        private,
        None,
        b"making its mounts private",
    )?;
    let proc = Some(c"proc");
    mount(proc, c"/proc", proc, PROC_FLAGS, None, b"mounting /proc")?;
    for dir in &ns.proc_read_only {
        let (p, none) = (dir.as_ptr(), std::ptr::null());
        // A part this `/proc` lacks is skipped, as bubblewrap's `--ro-bind-try` does.
        if unsafe { libc::mount(p, p, none, libc::MS_BIND | libc::MS_REC, none.cast()) } != 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT) {
                continue;
            }
            return Err(failed(b"binding a part of /proc"));
        }
        read_only(dir, b"making a part of /proc read-only")?;
    }
    for file in &ns.proc_masked {
        let null = Some(c"/dev/null");
        mount(
            null,
            file,
            None,
            libc::MS_BIND,
            None,
            b"masking a file of /proc",
        )?;
        read_only(file, b"masking a file of /proc")?;
    }
    // A workspace under /tmp or /dev/shm: a copy of its mount (with the hidden data dir
    // on it), put back once the fresh directory covers it.
    let workspace = match &ns.covered {
        Some((path, _)) => {
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_open_tree,
                    libc::AT_FDCWD,
                    path.as_ptr(),
                    OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE,
                )
            };
            if fd < 0 {
                return Err(failed(b"copying the workspace's mount"));
            }
            Some(fd as libc::c_int)
        }
        None => None,
    };
    let tmpfs = Some(c"tmpfs");
    let tmp_flags = libc::MS_NOSUID | libc::MS_NODEV;
    for (dir, options) in [(c"/tmp", &ns.tmp_options), (c"/dev/shm", &ns.shm_options)] {
        let what = b"mounting /tmp or /dev/shm";
        mount(tmpfs, dir, tmpfs, tmp_flags, Some(options), what)?;
    }
    // A devpts instance of its own: bubblewrap's is shared by every command, so one
    // could open another's terminal (and read the input meant for its program).
    let devpts = Some(c"devpts");
    let options = Some(c"newinstance,ptmxmode=0666,mode=620");
    let pts_flags = libc::MS_NOSUID | libc::MS_NOEXEC;
    mount(
        devpts,
        c"/dev/pts",
        devpts,
        pts_flags,
        options,
        b"mounting /dev/pts",
    )?;
    if let (Some(fd), Some((path, dirs))) = (workspace, &ns.covered) {
        for dir in dirs {
            if unsafe { libc::mkdir(dir.as_ptr(), 0o755) } != 0
                && std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST)
            {
                return Err(failed(b"making the workspace's directory"));
            }
        }
        let r = unsafe {
            libc::syscall(
                libc::SYS_move_mount,
                fd,
                c"".as_ptr(),
                libc::AT_FDCWD,
                path.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            )
        };
        if r != 0 {
            return Err(failed(b"mounting the workspace again"));
        }
        unsafe { libc::close(fd) };
    }
    if let Some(inner) = &ns.inner {
        check(
            unsafe { libc::setns(inner.as_raw_fd(), libc::CLONE_NEWUSER) },
            b"joining its nested user namespace",
        )?;
    }
    check(
        unsafe { libc::chdir(cwd.as_ptr()) },
        b"changing to the working directory",
    )?;
    crate::caps::drop_capabilities().map_err(|_| failed(b"dropping capabilities"))?;
    // Dies with the supervisor (set after the last change of credentials, which could
    // clear it), unless the supervisor is already gone: then nothing is to run, and no
    // one would end it.
    check(
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) },
        b"PR_SET_PDEATHSIG",
    )?;
    let mut watch = libc::pollfd {
        fd: supervisor,
        events: libc::POLLIN,
        revents: 0,
    };
    if unsafe { libc::poll(&raw mut watch, 1, 0) } != 0 {
        unsafe { libc::_exit(137) }
    }
    check(
        unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) },
        b"PR_SET_NO_NEW_PRIVS",
    )?;
    install_forked(&ns.filter).map_err(|_| failed(b"installing the seccomp filter"))?;
    Ok(())
}

/// Makes `cmd`'s child (the browser, started by its keeper) find this process's stdin
/// as its descriptor 3 and its stdout as its descriptor 4 (Chromium's
/// `--remote-debugging-pipe`), and die with this process (`PR_SET_PDEATHSIG`, set
/// after the standard library changed its user). Returns the copies the child takes
/// them from: keep them until `cmd` is spawned, then drop them.
pub(crate) fn devtools_pipe(
    cmd: &mut std::process::Command,
) -> Result<[std::os::fd::OwnedFd; 2], String> {
    use std::os::fd::AsRawFd;
    let copy = |fd: std::os::fd::BorrowedFd<'_>| {
        rustix::io::fcntl_dupfd_cloexec(fd, 10).map_err(|e| format!("dup: {e}"))
    };
    let read = copy(rustix::stdio::stdin())?;
    let write = copy(rustix::stdio::stdout())?;
    let (r, w) = (read.as_raw_fd(), write.as_raw_fd());
    let parent = rustix::process::getpid().as_raw_nonzero().get();
    // SAFETY: the closure runs in the forked child before `exec`: only raw system calls
    // (`dup2`, `prctl`, `getppid`, `_exit`), no allocation, no lock. `r` and `w` stay
    // open in the parent until the spawn returns (the caller holds them), so they are
    // open in the child; `dup2` onto 3 and 4 leaves the new descriptors without
    // close-on-exec, and closes whatever the child had there (only copies marked
    // close-on-exec, which `exec` would close anyway).
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(r, 3) != 3 || libc::dup2(w, 4) != 4 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The keeper already gone: nothing would end the browser.
            if libc::getppid() != parent {
                libc::_exit(137);
            }
            Ok(())
        });
    }
    Ok([read, write])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::process::Command;

    /// This process's anonymous resident memory, in MB.
    fn anon_mb() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap();
        kb / 1024
    }

    /// 80 MB allocated in 4 KB blocks by a thread (its own arena) and freed but for one
    /// block in 64: glibc keeps the free pages between the survivors resident until the
    /// memory is released.
    #[cfg(target_env = "gnu")]
    #[test]
    fn freed_memory_glibc_keeps_is_given_back() {
        std::thread::spawn(|| {
            let blocks: Vec<Vec<u8>> = (0..20_000).map(|_| vec![1u8; 4096]).collect();
            let kept: Vec<Vec<u8>> = blocks.into_iter().step_by(64).collect();
            let held = anon_mb();
            assert!(release_free_memory(), "something was free to give back");
            let after = anon_mb();
            assert!(
                after + 40 <= held,
                "{held} MB resident before the release, {after} MB after"
            );
            drop(kept);
        })
        .join()
        .unwrap();
    }

    /// A descriptor this process holds without close-on-exec (as one inherited from a
    /// parent would be) does not reach the child; without the call it does.
    #[test]
    fn an_inherited_descriptor_does_not_reach_the_command() {
        let file = tempfile::tempfile().unwrap();
        rustix::io::fcntl_setfd(&file, rustix::io::FdFlags::empty()).unwrap();
        let fd = file.as_raw_fd();
        let probe = format!("test -e /proc/self/fd/{fd} && echo open || echo closed");
        let run = |close: bool| {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", &probe]);
            if close {
                close_inherited_fds(&mut cmd);
            }
            String::from_utf8(cmd.output().unwrap().stdout).unwrap()
        };
        assert_eq!(run(false), "open\n", "the test itself must leak the fd");
        assert_eq!(run(true), "closed\n");
    }

    #[test]
    fn a_missing_program_is_still_reported() {
        let mut cmd = Command::new("/nonexistent/program");
        close_inherited_fds(&mut cmd);
        let e = cmd.status().unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }
}
