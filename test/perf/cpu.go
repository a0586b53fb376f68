package perf

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// userHZ is the unit of /proc/<pid>/stat's CPU times, the kernel's
// USER_HZ: 100 on every architecture Linux runs this harness on, fixed by
// its ABI whatever the kernel's own tick rate.
const userHZ = 100

// cpuSeconds is the CPU time, user and system, that process pid has used
// so far, all its threads together, from /proc/<pid>/stat.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	return parseCPUSeconds(string(data))
}

// parseCPUSeconds reads utime and stime, the 14th and 15th fields of
// /proc/<pid>/stat. The command, the 2nd, is in parentheses and may hold
// spaces and parentheses, so the fields are counted from its last ')'.
func parseCPUSeconds(stat string) (float64, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/<pid>/stat %q has no command in parentheses", stat)
	}
	// fields[0] is the state, the 3rd field.
	fields := strings.Fields(stat[end+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("/proc/<pid>/stat has %d fields after the command, want more than %d", len(fields), stime)
	}
	var ticks float64
	for _, i := range []int{utime, stime} {
		n, err := strconv.ParseUint(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/<pid>/stat field %d: %w", i+3, err)
		}
		ticks += float64(n)
	}
	return ticks / userHZ, nil
}
