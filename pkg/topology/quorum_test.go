package topology

import "testing"

func TestQuorum(t *testing.T) {
	q := Quorum{MinMember: 4}
	cases := []struct {
		name string
		got  bool
		want bool
	}{
		{name: "members that exist alone make the quorum", got: q.EnoughMembers(4, 0), want: true},
		{name: "late members to come count toward the members that exist", got: q.EnoughMembers(3, 1), want: true},
		{name: "too few members, late ones counted, are not enough", got: q.EnoughMembers(2, 1), want: false},
		{name: "more members than the quorum are enough", got: q.EnoughMembers(6, 0), want: true},
		{name: "the member that makes the count the quorum completes the group", got: q.CompletedBy(4), want: true},
		{name: "a member beyond the quorum completes nothing", got: q.CompletedBy(5), want: false},
		{name: "a member short of the quorum completes nothing", got: q.CompletedBy(3), want: false},
		{name: "placed members equal to the quorum make the gang", got: q.ReachedBy(4), want: true},
		{name: "placed members short of the quorum do not", got: q.ReachedBy(3), want: false},
		{name: "a quorum of zero is reached by none placed", got: Quorum{}.ReachedBy(0), want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestLateToComeTotal(t *testing.T) {
	cases := []struct {
		name string
		late LateToCome
		want int32
	}{
		{name: "no late role has none to come"},
		{name: "one late role's missing members", late: LateToCome{"launcher": 1}, want: 1},
		{name: "every late role's missing members add up", late: LateToCome{"launcher": 1, "evaluator": 2, "chief": 0}, want: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.late.Total(); got != tc.want {
				t.Errorf("Total() = %d, want %d", got, tc.want)
			}
		})
	}
}
