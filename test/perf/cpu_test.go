package perf

import (
	"os"
	"testing"
)

func TestParseCPUSeconds(t *testing.T) {
	cases := []struct {
		name    string
		stat    string
		want    float64
		wantErr bool
	}{
		{
			name: "user and system time are added, in USER_HZ ticks",
			stat: "4242 (kube-scheduler) S 1 4242 1 0 -1 4194560 100 0 0 0 1234 56 0 0 20 0 12 0 100 0 0",
			want: 12.90,
		},
		{
			name: "a command with spaces and parentheses does not shift the fields",
			stat: "7 (a (b) c) R 1 7 1 0 -1 0 0 0 0 0 300 200 0 0 20 0 1 0 1 0 0",
			want: 5,
		},
		{
			name:    "a line cut short is an error, not zero",
			stat:    "7 (short) R 1 7 1 0 -1 0 0 0 0 0 300",
			wantErr: true,
		},
		{
			name:    "a field that is not a count is an error",
			stat:    "7 (x) R 1 7 1 0 -1 0 0 0 0 0 many 200 0 0",
			wantErr: true,
		},
		{
			name:    "no command is an error",
			stat:    "7 x R 1",
			wantErr: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCPUSeconds(tc.stat)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseCPUSeconds() error = %v, want error: %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("parseCPUSeconds() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCPUSecondsOfThisProcessGrows(t *testing.T) {
	before, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Burn a bounded amount of CPU until the kernel's tick shows it.
	after, work := before, 0
	for i := 0; i < 1e4 && after == before; i++ {
		for j := range 100_000 {
			work += j * j % 7
		}
		if after, err = cpuSeconds(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}
	if after <= before {
		t.Errorf("this process's CPU time stayed at %v s while it computed %d", before, work)
	}
}
