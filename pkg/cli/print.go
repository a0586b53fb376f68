package cli

import (
	"encoding/json"
	"fmt"
	"github.com/liggitt/tabwriter"
	"io"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/pkg/gangview"
)

// waitingWidth is how much of a gang's waiting-for line a table shows;
// -o wide shows all of it.
const waitingWidth = 60

// table prints gangs as `kubectl get` prints objects.
type table struct {
	w             *tabwriter.Writer
	wide          bool
	allNamespaces bool
	color         bool
}

func (o *options) table() *table {
	return &table{w: printers.GetNewTabWriter(o.streams.Out), wide: o.output == "wide", allNamespaces: o.allNamespaces, color: o.color}
}

func (t *table) header() {
	cols := []string{"NAME", "SOURCE", "PHASE", "MEMBERS", "LAUNCH", "DOMAIN", "HELD-ROOMS", "AGE", "WAITING-FOR"}
	if t.allNamespaces {
		cols = append([]string{"NAMESPACE"}, cols...)
	}
	fmt.Fprintln(t.w, strings.Join(cols, "\t"))
}

// row prints one gang and returns what a watch compares (rowString).
func (t *table) row(g gangview.Gang, now time.Time) string {
	_, cols := t.columns(g, now)
	if t.color {
		phase := 2
		if t.allNamespaces {
			phase = 3
		}
		cols[phase] = paint(g.Phase, cols[phase])
	}
	fmt.Fprintln(t.w, strings.Join(cols, "\t"))
	return t.rowString(g)
}

// rowString is the line row would print for g, without colour and with
// no age: what a watch compares, so that a gang is printed again when it
// changes, not as it ages.
func (t *table) rowString(g gangview.Gang) string {
	g.Created = metav1.Time{}
	line, _ := t.columns(g, time.Time{})
	return line
}

func (t *table) columns(g gangview.Gang, now time.Time) (string, []string) {
	waiting := orDash(g.WaitingFor)
	if !t.wide && len(waiting) > waitingWidth {
		waiting = waiting[:waitingWidth-3] + "..."
	}
	cols := []string{g.Name, g.Source, string(g.Phase), members(g), orDash(g.LaunchStage), orDash(g.Domain), heldRooms(g.HeldRooms), age(g, now), waiting}
	if t.allNamespaces {
		cols = append([]string{g.Namespace}, cols...)
	}
	return strings.Join(cols, "\t"), cols
}

func (t *table) flush() error { return t.w.Flush() }

// members is bound/expected, with min..max for an elastic group.
func members(g gangview.Gang) string {
	s := fmt.Sprintf("%d/%d", g.Bound, g.MinMember)
	if g.Elastic != nil {
		s += fmt.Sprintf(" (%d..%d)", g.MinMember, g.MaxMember)
	}
	return s
}

// heldRooms is how many rooms are held, and for which roles.
func heldRooms(rooms []gangview.HeldRoom) string {
	if len(rooms) == 0 {
		return "-"
	}
	var roles []string
	for _, r := range rooms {
		if !slices.Contains(roles, r.Role) {
			roles = append(roles, r.Role)
		}
	}
	return fmt.Sprintf("%d (%s)", len(rooms), strings.Join(roles, ","))
}

func age(g gangview.Gang, now time.Time) string {
	if g.Created.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(g.Created.Time))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// paint colours a phase: green when the gang runs or finished, red when
// it failed, yellow while it waits.
func paint(phase gangview.Phase, s string) string {
	code := "33"
	switch phase {
	case gangview.Running, gangview.Finished, gangview.Admitted:
		code = "32"
	case gangview.Failed:
		code = "31"
	}
	return "\033[" + code + "m" + s + "\033[0m"
}

// printList prints gangs as a JSON or YAML list.
func printList(w io.Writer, format string, gangs []gangview.Gang) error {
	if gangs == nil {
		gangs = []gangview.Gang{}
	}
	return printObject(w, format, map[string]any{"apiVersion": "muster.dev/v1", "kind": "GangList", "items": gangs})
}

func printObject(w io.Writer, format string, v any) error {
	var out []byte
	var err error
	if format == "yaml" {
		out, err = yaml.Marshal(v)
	} else {
		out, err = json.MarshalIndent(v, "", "    ")
		out = append(out, '\n')
	}
	if err != nil {
		return fmt.Errorf("printing %s: %w", format, err)
	}
	_, err = w.Write(out)
	return err
}

// describe prints everything about one gang, as `kubectl describe` does:
// each section aligned on its own.
func describe(out io.Writer, g gangview.Gang, now time.Time, color bool) error {
	w := printers.GetNewTabWriter(out)
	phase := string(g.Phase)
	if color {
		phase = paint(g.Phase, phase)
	}
	fmt.Fprintf(w, "Name:\t%s\n", g.Name)
	fmt.Fprintf(w, "Namespace:\t%s\n", g.Namespace)
	fmt.Fprintf(w, "Source:\t%s\n", g.Source)
	fmt.Fprintf(w, "Phase:\t%s\n", phase)
	fmt.Fprintf(w, "Members:\t%s bound\n", members(g))
	fmt.Fprintf(w, "Launch:\t%s\n", orDash(g.LaunchStage))
	fmt.Fprintf(w, "Domain:\t%s\n", orDash(g.Domain))
	fmt.Fprintf(w, "Waiting for:\t%s\n", orDash(g.WaitingFor))
	fmt.Fprintf(w, "Age:\t%s\n", age(g, now))
	if k := g.Workload; k != nil {
		admitted := "no"
		if k.Admitted {
			admitted = "yes, by ClusterQueue " + k.ClusterQueue
		}
		fmt.Fprintf(w, "Kueue workload:\t%s, queue %s, admitted: %s\n", k.Name, orDash(k.Queue), admitted)
		if k.Message != "" {
			fmt.Fprintf(w, "Kueue says:\t%s\n", k.Message)
		}
	} else {
		fmt.Fprintf(w, "Kueue workload:\t<none>\n")
	}
	if err := w.Flush(); err != nil {
		return err
	}
	sections := []struct {
		title string
		cols  []string
		n     int
		row   func(int) []string
	}{
		{"Members by role", []string{"ROLE", "NAME", "NODE", "STATE", "SINCE", "WAITING-FOR"}, len(g.Members), func(i int) []string {
			m := g.Members[i]
			return []string{orDash(m.Role), m.Name, orDash(m.Node), m.State, since(m.Since.Time, now), orDash(m.WaitingFor)}
		}},
		{"Held rooms", []string{"ROLE", "NODE", "EXPIRES"}, len(g.HeldRooms), func(i int) []string {
			r := g.HeldRooms[i]
			return []string{r.Role, r.Node, "in " + duration.HumanDuration(r.Expires.Sub(now))}
		}},
		{"Claims", []string{"CLAIM", "PODS", "DEVICES"}, len(g.Claims), func(i int) []string {
			c := g.Claims[i]
			return []string{c.Name, strings.Join(c.Pods, ","), orDash(strings.Join(c.Devices, ","))}
		}},
	}
	for _, rs := range []struct {
		title   string
		records []gangview.Record
	}{{"Attempts", g.Attempts}, {"Preemptions", g.Preemptions}, {"Elastic changes", g.ElasticChanges}} {
		sections = append(sections, struct {
			title string
			cols  []string
			n     int
			row   func(int) []string
		}{rs.title, []string{"AGE", "REASON", "ABOUT", "NOTE"}, len(rs.records), func(i int) []string {
			r := rs.records[i]
			return []string{since(r.Time.Time, now), r.Reason, r.About, r.Note}
		}})
	}
	for _, sec := range sections {
		if sec.n == 0 {
			fmt.Fprintf(out, "%s: <none>\n", sec.title)
			continue
		}
		fmt.Fprintf(out, "%s:\n", sec.title)
		w := printers.GetNewTabWriter(out)
		fmt.Fprintf(w, "  %s\n", strings.Join(sec.cols, "\t"))
		for i := range sec.n {
			fmt.Fprintf(w, "  %s\n", strings.Join(sec.row(i), "\t"))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func since(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t))
}

// printAnswer prints why a pod waits.
func printAnswer(out io.Writer, a gangview.Answer) error {
	w := printers.GetNewTabWriter(out)
	fmt.Fprintf(w, "Pod:\t%s\n", a.Pod)
	fmt.Fprintf(w, "Gang:\t%s\n", orDash(a.Gang))
	fmt.Fprintf(w, "Phase:\t%s\n", orDash(string(a.Phase)))
	fmt.Fprintf(w, "muster says:\t%s\n", orDash(a.Said))
	fmt.Fprintf(w, "You see:\t%s\n", a.Trouble.Shows)
	fmt.Fprintf(w, "Cause:\t%s\n", a.Trouble.Cause)
	fmt.Fprintf(w, "Fix:\t%s\n", a.Trouble.Fix)
	return w.Flush()
}
