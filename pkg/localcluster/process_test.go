package localcluster

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func startTestProcess(t *testing.T, name, script string) *Process {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("no sh: %v", err)
	}
	p, err := startProcess(name, sh, []string{"-c", script}, nil, nil, t.TempDir(), false)
	if err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() { _ = p.stop(0) })
	return p
}

func TestStopEndsTheProgram(t *testing.T) {
	// The shell must stay the process: after an exec, /proc/PID/exe is no
	// longer the recorded binary, and Running rightly says false.
	p := startTestProcess(t, "sleeper", `trap "exit 0" TERM; while :; do sleep 0.05; done`)
	if !p.Running() {
		t.Fatalf("%s is not running after start", p)
	}
	if err := p.stop(5 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if p.Running() {
		t.Errorf("%s still runs after stop", p)
	}
}

func TestStopKillsAProgramThatIgnoresSIGTERM(t *testing.T) {
	p := startTestProcess(t, "stubborn", `trap "" TERM; echo trapped; while :; do sleep 0.05; done`)
	// Wait until the trap is set, or SIGTERM would end it at once.
	for !hasLog(p, "trapped") {
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.stop(200 * time.Millisecond); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if p.Running() {
		t.Errorf("%s survived SIGKILL", p)
	}
}

func hasLog(p *Process, text string) bool {
	data, _ := os.ReadFile(p.Log)
	return string(data) == text+"\n"
}

func TestARecycledPIDIsNotOurs(t *testing.T) {
	// This test's own PID, recorded as if it had been some other binary's:
	// muster-local must neither count it as running nor signal it.
	p := &Process{Name: "recycled", PID: os.Getpid(), Binary: "/nonexistent/etcd"}
	if p.Running() {
		t.Fatalf("a PID that runs another binary counts as running")
	}
	if err := p.stop(time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// Still here: stop sent nothing.
}

func TestRunningIsFalseOnceTheProgramExits(t *testing.T) {
	p := startTestProcess(t, "short", "exit 0")
	<-p.exited
	if p.Running() {
		t.Errorf("%s counts as running after it exited", p)
	}
}

func TestLogTailKeepsTheLastLines(t *testing.T) {
	p := startTestProcess(t, "chatty", "for i in 1 2 3 4 5; do echo line $i; done")
	<-p.exited
	if got, want := p.logTail(2), "line 4\nline 5"; got != want {
		t.Errorf("logTail(2) = %q, want %q", got, want)
	}
}
