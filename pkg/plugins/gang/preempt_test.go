package gang

import (
	"fmt"
	"strings"
	"testing"
)

func TestVictimListNamesTheFirstVictimsAndCountsTheRest(t *testing.T) {
	if got, want := victimList([]string{"ns/a", "ns/b"}), "ns/a, ns/b"; got != want {
		t.Errorf("two victims: got %q, want %q", got, want)
	}
	var names []string
	for i := range 50 {
		names = append(names, fmt.Sprintf("ns/low-%d", i))
	}
	if got, want := victimList(names), "ns/low-0, ns/low-1, ns/low-2, ns/low-3, ns/low-4 and 45 more"; got != want {
		t.Errorf("fifty victims: got %q, want %q", got, want)
	}
}

func TestVictimListKeepsThePreemptingEventWithinTheAPIsLimit(t *testing.T) {
	// The longest names there are: a namespace of 63 characters and a pod
	// name of 253.
	long := strings.Repeat("n", 63) + "/" + strings.Repeat("p", 253)
	names := []string{long, long, long, long, long, long}
	list := victimList(names)
	if want := long + " and 5 more"; list != want {
		t.Errorf("six victims of the longest names: got %q, want the first named and 5 counted", list)
	}
	note := fmt.Sprintf("took %s (priority below %d) so that its %d missing members fit at once", list, int32(-2147483648), 1<<30)
	if len(note) > 1024 {
		t.Errorf("the Preempting note has %d characters, more than an event may hold (1,024)", len(note))
	}
	if got := victimList([]string{long + long}); got != long+long {
		t.Errorf("one victim is named whatever its length; got %q", got)
	}
}
