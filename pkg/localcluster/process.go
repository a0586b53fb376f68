package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is one program of the local cluster, as recorded in its state file.
type Process struct {
	Name   string   `json:"name"`
	PID    int      `json:"pid"`
	Binary string   `json:"binary"`
	Args   []string `json:"args"`
	// Env is added to the environment it inherits.
	Env []string `json:"env,omitempty"`
	// Wrapper, when set, is a command that runs before the program and
	// execs it in place, with Binary and Args as its last arguments: the
	// PID is the program's.
	Wrapper []string `json:"wrapper,omitempty"`
	Log     string   `json:"log"`
	// Health is a URL that answers 200 once the program serves; empty when
	// the program has none.
	Health string `json:"health,omitempty"`
	// Metrics is the URL of the program's /metrics when it is not served
	// beside Health; empty when it is, or when the program has none.
	Metrics string `json:"metrics,omitempty"`

	// exited is closed once a child of this process has been reaped; nil
	// when the program was started by another muster-local invocation.
	exited chan struct{}
}

// stopGrace is how long a program has to exit after SIGTERM before it is
// killed.
const stopGrace = 10 * time.Second

// startProcess starts binary with args, its output going to logDir/name.log.
// A detached program outlives the caller; otherwise it is killed with it, so
// a test binary that dies leaves nothing behind.
func startProcess(name, binary string, args, env, wrapper []string, logDir string, detach bool) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", name, err)
	}
	defer logFile.Close()

	// Running compares this path with /proc/PID/exe, which the kernel
	// gives absolute and with links resolved.
	if binary, err = filepath.Abs(binary); err == nil {
		binary, err = filepath.EvalSymlinks(binary)
	}
	if err != nil {
		return nil, fmt.Errorf("resolving the binary of %s: %w", name, err)
	}
	cmd := exec.Command(binary, args...)
	if len(wrapper) > 0 {
		cmd = exec.Command(wrapper[0], slices.Concat(wrapper[1:], []string{binary}, args)...)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	// Its own process group keeps a Ctrl-C meant for the caller from
	// reaching it; muster-local stops it in order instead.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !detach {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, PID: cmd.Process.Pid, Binary: binary, Args: args, Env: env, Wrapper: wrapper, Log: logPath}
	if !detach {
		p.exited = make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(p.exited)
		}()
	}
	if len(wrapper) > 0 && !p.execed() {
		return nil, fmt.Errorf("%s: %s did not exec it; the end of %s:\n%s", name, wrapper[0], logPath, p.logTail(20))
	}
	if detach {
		// init adopts and reaps it once this process exits.
		if err := cmd.Process.Release(); err != nil {
			return nil, fmt.Errorf("releasing %s: %w", name, err)
		}
	}
	return p, nil
}

// execed waits until the wrapper has exec'd the program in place, and
// reports whether it did before it exited.
func (p *Process) execed() bool {
	deadline := time.Now().Add(wrapperGrace)
	for time.Now().Before(deadline) {
		if p.Running() {
			return true
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p.PID)); err != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// wrapperGrace bounds how long a wrapper may take to exec its program.
const wrapperGrace = 10 * time.Second

// Running reports whether the program still runs as the same binary: a PID
// that the kernel has since given to another program does not count.
func (p *Process) Running() bool {
	if p.exited != nil {
		select {
		case <-p.exited:
			return false
		default:
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
		return false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID))
	if err != nil {
		return false
	}
	return strings.TrimSuffix(exe, " (deleted)") == p.Binary
}

// stop ends the program: SIGTERM, then SIGKILL after grace. It touches
// nothing but the recorded PID, and only while that PID is still the
// recorded binary.
func (p *Process) stop(grace time.Duration) error {
	if !p.Running() {
		return nil
	}
	// A paused program (Cluster.Pause) handles SIGTERM only once it runs.
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGCONT} {
		if err := syscall.Kill(p.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("stopping %s (pid %d): %w", p.Name, p.PID, err)
		}
	}
	if p.waitGone(grace) {
		return nil
	}
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s (pid %d): %w", p.Name, p.PID, err)
	}
	if p.waitGone(grace) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) still runs after SIGKILL", p.Name, p.PID)
}

// kill ends the program with SIGKILL alone, giving it no chance to clean
// up, and waits until it is gone.
func (p *Process) kill() error {
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s (pid %d): %w", p.Name, p.PID, err)
	}
	if !p.waitGone(stopGrace) {
		return fmt.Errorf("%s (pid %d) still runs after SIGKILL", p.Name, p.PID)
	}
	return nil
}

func (p *Process) waitGone(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !p.Running() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// logTail returns the last lines of the program's log, to explain a failure.
func (p *Process) logTail(lines int) string {
	data, err := os.ReadFile(p.Log)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func (p *Process) String() string {
	return p.Name + " (pid " + strconv.Itoa(p.PID) + ")"
}
