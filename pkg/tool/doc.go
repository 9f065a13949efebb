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
//     (DESIGN §5.5): Retryable is redelivered by the broker with backoff, Fatal
//     falls back along the plan, Repairable goes to the repair stream. A bad
//     argument is always Repairable and names the argument (see Args).
//   - A call whose context is cancelled or expires returns promptly with a
//     Retryable error that wraps ctx.Err(): the work was not done and may be
//     tried again.
//   - Tools are safe for concurrent use.
//   - Tools with side effects pass Call.IdempotencyKey ("<executionid>/<step>") on,
//     so a redelivered job does not repeat them (DESIGN §5.8).
//
// The Args helpers read arguments with such errors:
//
//	http: argument "url" is required
//	exec: argument "command" must be a list of strings, got string
//
// Func turns a function into a Tool; NewSet collects tools; Builtins returns the
// four built in here.
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
// The tool reaches any address the worker can, loopback and cloud metadata
// included; give HTTPConfig.Client a dialer that refuses them where skills are
// not trusted.
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
//   - Environment: exactly ExecConfig.BaseEnv plus the call's "env", nothing of
//     the worker's, whose environment holds its credentials. Of the worker's
//     open files only stdin, stdout and stderr are passed, as pipes; everything
//     Go opens is close-on-exec. (Descriptors the worker itself inherited without
//     close-on-exec do pass on; a worker's main can mark them with
//     unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) at startup.)
//   - Directory: a fresh temporary directory per call, removed afterwards, or
//     ExecConfig.WorkDir; "dir" must be a relative path that stays inside it,
//     also after resolving symlinks.
//   - Process group: the process leads a group of its own (Setpgid). On timeout
//     or cancellation the whole group gets SIGKILL, grandchildren included; so
//     does whatever the process leaves running behind when it exits. The exited
//     process is kept as a zombie (waitid with WNOWAIT) until its group is killed,
//     so the group id cannot have been reused by then. Wait gives up on output
//     pipes still held by escaped descendants after a short WaitDelay.
//   - Output: at most MaxOutputBytes of stdout and of stderr are kept; the rest is
//     read and dropped, so the process never blocks on a full pipe.
//   - Resource limits (Limits: CPU seconds, address space, open files, processes)
//     are set with prlimit(2) before the program's first instruction: the child
//     is started with PTRACE_TRACEME, so the kernel stops it right after execve;
//     the worker sets the limits on the stopped process and detaches. A prlimit
//     after an ordinary start would race the program, which could fork unlimited
//     children first. This needs ptrace to be permitted (some container seccomp
//     profiles forbid it; calls with limits then fail as Fatal, with a hint). When
//     no limit is set, no ptrace is used.
//
// What it does not do: it is not a security boundary against a hostile program.
// The process runs as the worker's user, so it can read whatever the worker can:
// files, and even /proc/<worker pid>/environ unless the worker made itself
// non-dumpable. It can leave the directory (cd ..) and use the network. A
// descendant that calls setsid or setpgid leaves the group and survives the kill.
// RLIMIT_NPROC counts all processes of the user and does not bind root;
// RLIMIT_AS limits address space, not resident memory. For untrusted code run the
// worker as a dedicated user in a container or VM, or make the command a
// sandboxing tool such as bwrap or nsjail; this package is the last line, not the
// only one.
//
// # echo and noop
//
// Echo returns its arguments; Noop returns nil. They exist for examples, tests
// and benchmarks of the engine around them.
package tool
