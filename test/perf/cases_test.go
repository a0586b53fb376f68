package perf

import "testing"

func TestFeatureGatesFlag(t *testing.T) {
	cases := []struct {
		name    string
		gates   any
		want    string
		wantErr bool
	}{
		{name: "no gates is no flag", gates: nil, want: ""},
		{
			name:  "gates are written in name order, as kube-scheduler's flag takes them",
			gates: map[string]any{"GenericWorkload": true, "DRAWorkloadResourceClaims": true, "Beta": false},
			want:  "Beta=false,DRAWorkloadResourceClaims=true,GenericWorkload=true",
		},
		{name: "a list is not gates", gates: []any{"GenericWorkload"}, wantErr: true},
		{name: "a gate set to a string is refused", gates: map[string]any{"GenericWorkload": "yes"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := featureGatesFlag(tc.gates)
			if (err != nil) != tc.wantErr {
				t.Fatalf("featureGatesFlag() error = %v, want error: %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("featureGatesFlag() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCaseAndProfile(t *testing.T) {
	cases := []struct{ name, benchmark, wantCase, wantProfile string }{
		{"the profile is cut from the case", "BenchmarkUpstreamGangScheduling/GangScheduling-intree/5000Nodes_1000Gangs_3000Pods", "GangScheduling", "intree"},
		{"a case's own dashes are kept", "BenchmarkUpstreamX/Some-Case-muster/w", "Some-Case", "muster"},
		{"a case with no profile has none", "BenchmarkPerfScheduling/GangFit10", "GangFit10", ""},
		{"no case is empty", "BenchmarkUpstreamX", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := caseOf(tc.benchmark); got != tc.wantCase {
				t.Errorf("caseOf(%q) = %q, want %q", tc.benchmark, got, tc.wantCase)
			}
			if got := profileOf(tc.benchmark); got != tc.wantProfile {
				t.Errorf("profileOf(%q) = %q, want %q", tc.benchmark, got, tc.wantProfile)
			}
		})
	}
}
