// Package tool is the seam between workflow steps and the things they call: a
// Tool takes a Call (JSON-like arguments plus the execution, step and idempotency
// key) and returns a JSON-like result or a classified error.
//
// # The contract
//
// Every Tool, built in or served by another process, keeps these promises, and
// package tooltest checks them:
//
//   - Name is non-empty, has no spaces and never changes; a Set looks tools up by it.
//   - A result is JSON-like (CheckValue): map[string]any, []any, string, int64,
//     float64, bool or nil, so it can be checkpointed, templated and published
//     without surprises. Arguments arrive in the same form and are not modified.
//   - Every error is a *failure.Error whose class tells the worker what to do
//     next: Retryable is redelivered by the broker with backoff, Fatal
//     falls back along the plan, Repairable goes to the repair stream. A bad
//     argument is always Repairable and names the argument (see Args).
//   - A call whose context is cancelled or expires returns promptly with a
//     Retryable error that wraps ctx.Err(): the work was not done and may be
//     tried again.
//   - Tools are safe for concurrent use.
//   - Tools with side effects pass Call.IdempotencyKey ("<executionid>/<step>") on,
//     so a redelivered job does not repeat them.
//
// The Args helpers read arguments with such errors:
//
//	http: argument "url" is required
//	exec: argument "command" must be a list of strings, got string
//
// Func turns a function into a Tool; NewSet collects tools; Builtins returns the
// four built in here.
//
// # Permissions
//
// The http and exec tools act on the world from the worker itself, so they act
// only as far as the skill they run for is allowed to: its `permissions` field,
// which reaches them in the call's context (WithPermissions, SkillPermissions;
// the workflow engine and the instruction runner put it there). A call whose
// context carries none is granted nothing.
//
//	network: {outbound: true}   http may send requests; exec processes share the
//	                            worker's network. Without it http refuses (Fatal,
//	                            ErrNoNetwork) and exec processes get a network
//	                            namespace with nothing in it.
//	environment: {allow: [..]}  exec processes get these variables of the worker's
//	                            environment; never ones starting with SKILLBUS_.
//
// Tools served by other processes (bus, MCP) are not bound by them: they run with
// whatever their own process may do. CheckPrerequisites checks a skill's
// prerequisites on a worker before it runs.
//
// # http
//
// NewHTTP sends one request per call (see NewHTTP for the arguments) with
// go-retryablehttp, whose retry policy also decides what is retryable. By default
// it does not retry itself: the broker does, without holding a worker. Errors
// name the method and the URL without credentials or query, the status, and the
// start of the response body.
//
//	connection error, timeout, 429, 5xx except 501   Retryable
//	400, 422 (the request's parameters)              Repairable
//	401, 403, 404, 405, 410, 501, other 4xx          Fatal
//	redirect loop, untrusted certificate             Fatal
//	response larger than MaxResponseBytes            Fatal
//	bad or missing argument, URL not http(s)         Repairable
//
// Non-GET/HEAD requests carry Call.IdempotencyKey as the Idempotency-Key header.
// A skill without network permission gets a Fatal ErrNoNetwork. One with it
// reaches any address the worker can, loopback and cloud metadata included; give
// HTTPConfig.Client a dialer that refuses them where skills are not trusted.
//
// The tool's own client records OpenTelemetry's http.client.request.duration and
// http.client.request.body.size histograms with attribute sets made once per
// method, server, protocol and status, and, with tracing on, a CLIENT span per
// request with W3C trace headers through otelhttp, whose url.full has every query
// value and any user info replaced by REDACTED (a query often carries an API key);
// with tracing off a request goes straight to the transport, carrying the trace
// context its context has.
//
// # exec
//
// NewExec runs a program from an argument vector, never through a shell (see
// NewExec for the arguments).
//
//	exit status 0                                   success
//	exit status 75 (EX_TEMPFAIL)                    Retryable
//	timeout, cancellation                           Retryable
//	other exit status, killed by a signal           Fatal
//	program not found or not executable             Fatal
//	bad or missing argument, "dir" outside          Repairable
//
// Errors for a failed process carry its exit status and the last 500 bytes of
// its stderr (ExitError).
//
// # The exec sandbox
//
// What it does:
//
//   - No shell: the vector goes to execve as is, so "; rm -rf" in an argument is
//     just text. A program name without a slash is looked up in the PATH of the
//     process's own environment (absolute entries only), not the worker's.
//   - Environment: exactly ExecConfig.BaseEnv, the variables the skill's
//     permissions.environment.allow names (if the worker has them), and the
//     call's "env"; nothing else of the worker's, whose environment holds its
//     credentials. Of the worker's
//     open files only stdin, stdout and stderr are passed, as pipes; everything
//     Go opens is close-on-exec. (Descriptors the worker itself inherited without
//     close-on-exec do pass on; a worker's main can mark them with
//     unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) at startup.)
//   - Directory: a fresh temporary directory per call, removed afterwards, or
//     ExecConfig.WorkDir or CallDir; "dir" must be a relative path that stays inside it,
//     also after resolving symlinks.
//   - Process group: the process leads a group of its own (Setpgid). On timeout
//     or cancellation the whole group gets SIGKILL, grandchildren included; so
//     does whatever the process leaves running behind when it exits. The exited
//     process is kept as a zombie (waitid with WNOWAIT) until its group is killed,
//     so the group id cannot have been reused by then. Wait gives up on output
//     pipes still held by escaped descendants after a short WaitDelay.
//   - Output: at most MaxOutputBytes of stdout and of stderr are kept; the rest is
//     read and dropped, so the process never blocks on a full pipe.
//   - Resource limits (Limits: CPU seconds, address space, open files, processes;
//     by default 256 processes and threads per call and 1024 open files per
//     process, DefaultLimits; a skill's permissions.limits may ask for less)
//     are set with prlimit(2) before the program's first instruction: the child
//     is started with PTRACE_TRACEME, so the kernel stops it right after execve;
//     the worker sets the limits on the stopped process and detaches. A prlimit
//     after an ordinary start would race the program, which could fork unlimited
//     children first. This needs ptrace to be permitted (some container seccomp
//     profiles forbid it; calls with limits then fail as Fatal, with a hint).
//     The process limit is RLIMIT_NPROC, which the kernel counts per user and
//     user namespace: each call has a user (root worker) or a user namespace
//     (other workers) of its own, so it bounds the call. The worker counts the
//     call's processes and threads every tenth of a second, and kills a call
//     that has reached its limit: a fork bomb, whose forks fail but whose
//     processes retry, is over in well under a second, and its step fails,
//     Fatal, saying why.
//   - Namespaces: the process starts in a PID namespace, under a worker that is
//     not root in a user namespace, and, unless the skill has network
//     permission, in a network namespace of its own
//     (holding only a loopback interface that is down: no route to NATS, to the
//     metadata service, to anything). The program is its PID namespace's init:
//     when it exits, or is killed, the kernel kills everything it started, even
//     descendants that left its process group with setsid. Like any init, it
//     ignores signals it has no handler for that come from inside its namespace
//     (kill $$ in a shell does nothing), and SIGXCPU at the soft CPU limit: the
//     hard limit, a second later, ends it with SIGKILL.
//   - Death with the worker: processes have SIGKILL as their parent-death signal.
//     The kernel sends it when the thread that started the process exits, not the
//     process (golang.org/issue/27505), so each process is started from an OS
//     thread of its own, kept alive while it runs; when the worker dies, even by
//     SIGKILL, its processes die, and with them everything they started. A job
//     redelivered to another worker cannot meet a copy of its step still running.
//     The child arms that signal a few instructions after clone(2); Go's guard
//     for a parent that died in between (the child compares getppid and kills
//     itself) cannot work in a PID namespace, where getppid is 0 and init cannot
//     kill itself. So every process in a PID namespace is started traced, like
//     one with limits, and let go only once it has stopped after execve, when
//     its parent-death signal is armed. A worker killed in that instant leaves
//     a process that is another's child when it asks to be traced: it stops
//     after execve, before its program's first instruction, and never runs
//     (it stays stopped, state "t" in ps, until killed; under a reaper that
//     exits, such as a container's init, it dies with it). Where ptrace is
//     forbidden, processes without limits start untraced, and that instant is
//     open again; the worker logs a warning the first time.
//   - No privileges from the program file: every process is started from a
//     thread with no_new_privs (PR_SET_NO_NEW_PRIVS), which it and everything
//     it runs inherit, so no execve of the call gives the setuid, setgid or
//     file-capability privileges of its program: su, sudo, passwd or a setuid
//     ping run with the process's own user. A skill runs with its user's rights
//     and nothing more.
//   - User: when the worker runs as root, each call's process runs as a user
//     and group of its own, leased from ExecConfig.UIDs for as long as the
//     process runs (workers on one host lease them through a lock file, so no
//     two running calls share one), without root's groups; its working
//     directory (mode 0700) is given to that user: a fresh temporary one, or a
//     CallDir (a script skill run's copy of its files). With a WorkDir, which
//     every call shares, processes run as nobody (65534:65534) instead, and
//     ExecConfig.RunAs names another user. A worker that is not root runs them
//     as its own user, seen inside as 65534.
//   - Files: processes start with umask 077, so what they create is private to
//     their user unless they make it otherwise.
//   - Other calls: each call's process is started from a thread of its own in
//     a Landlock domain of its own, which the process and its children
//     inherit: a process cannot ptrace, read the /proc files (environ, mem,
//     cwd, fd, maps) of, signal, or connect to the abstract Unix sockets of a
//     process of another call, even of the same user (signals and sockets from
//     Linux 6.12, the rest from 5.13). Its PID namespace gives it no pid by
//     which to signal one anyway. Under a root worker it does not even see
//     them: processes get a /proc of their own, mounted with hidepid=invisible,
//     that lists only the processes they could trace, those of their call, and
//     their working directories are their own users'. Under a worker that is
//     not root, the processes of other calls are listed in /proc (their command
//     lines are visible), and their files, as the same user's, are readable.
//     NewExec says so, once per process, at WARN (NotRootWarning).
//   - The worker's secrets: NewExec makes the worker non-dumpable
//     (PR_SET_DUMPABLE 0), so /proc/<worker>/environ and mem belong to root and
//     ptrace needs CAP_SYS_PTRACE. A process in a user namespace or Landlock
//     domain of its own cannot read or ptrace the worker even as the same user,
//     and a process of another user never could: it can neither read the NATS
//     password or model key from the worker's environment or memory, nor,
//     without network permission, reach NATS. (The worker's environment block
//     still holds what it was started with; a worker that drops its secrets
//     after reading them closes that door too.)
//
// Where the host refuses one of these (no Landlock, no CAP_SYS_ADMIN for the
// private /proc), processes start without it and the worker logs a warning
// once.
//
// Hosts that refuse namespaces (a container without CAP_SYS_ADMIN, user
// namespaces switched off): processes then start without them, and a skill
// without network permission cannot run exec at all: its calls fail, Fatal,
// saying why, rather than run with a network it was not granted. Without a PID
// namespace, a process that left its call's process group (setsid) would
// outlive the call: a root worker kills every process of the call's leased
// user, with kill(-1) as that user, before another call may lease it (a
// worker of another user cannot, and such a process runs on). A root worker
// sets the limits of a process of another user as that user, on the thread that
// started it, so it needs no CAP_SYS_RESOURCE (which containers often take
// from root).
//
// What it does not do: confine a process to paths. It can read whatever its user
// can, leave its directory (cd ..) and write wherever its user may (/tmp, where
// what it leaves stays, owned by its user ID, which a later call may lease). So
// skills' permissions.filesystem, and execution.sandbox container, are rejected
// when a skill is loaded, as not supported yet. Cgroups are not used: a cgroup
// kills nothing by itself when the worker dies, while the PID namespace does.
// So nothing bounds the memory of a call as a whole (RLIMIT_AS limits the address
// space of each process, not resident memory), and calls that share a user
// (with a WorkDir or RunAs) share their process limit. Under a hostile program the kernel is the boundary: run
// workers in a VM or gVisor where skills are not trusted.
//
// # echo and noop
//
// Echo returns its arguments; Noop returns nil. They exist for examples, tests
// and benchmarks of the engine around them.
package tool
