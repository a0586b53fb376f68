package conformance

import (
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/muster-dev/muster/pkg/topology"
)

func tensorflowGroup(t *testing.T, subnet int) map[string]*member {
	return group(t, subnet, map[string]string{
		topology.FrameworkAnnotation: "tensorflow", topology.RolesAnnotation: "ps=2,master=1,worker=2,evaluator=1",
	}, map[string]int{"ps": 2, "master": 1, "worker": 2, "evaluator": 1})
}

// checkTFConfigs runs testdata/tf_config_check.py on every member's
// TF_CONFIG and returns its report and whether every one passed.
func checkTFConfigs(t *testing.T, members map[string]*member) (string, bool) {
	t.Helper()
	args := []string{"testdata/tf_config_check.py"}
	for _, name := range slices.Sorted(maps.Keys(members)) {
		args = append(args, name+"="+members[name].getenv("TF_CONFIG"))
	}
	out, err := exec.Command("/usr/bin/python3", args...).CombinedOutput()
	return string(out), err == nil
}

// TestTensorFlowConfig: every pod's TF_CONFIG of a group with ps, a master,
// workers and an evaluator meets what TensorFlow requires of it.
func TestTensorFlowConfig(t *testing.T) {
	t.Parallel()
	members := tensorflowGroup(t, 21)
	out, ok := checkTFConfigs(t, members)
	if !ok {
		t.Errorf("TensorFlow would refuse a TF_CONFIG:\n%s", out)
	}
	if strings.Count(out, ": ok") != len(members) {
		t.Errorf("not every member was checked:\n%s", out)
	}
}

// TestTensorFlowConfigFailsOnAMasterOrAnIndexOutOfRange: the check refuses
// a coordinator named master, and a task index past its job's end.
func TestTensorFlowConfigFailsOnAMasterOrAnIndexOutOfRange(t *testing.T) {
	t.Parallel()
	members := tensorflowGroup(t, 22)
	chief := members["job-master-0"]
	chief.setenv("TF_CONFIG", strings.ReplaceAll(chief.getenv("TF_CONFIG"), `"chief"`, `"master"`))
	worker := members["job-worker-1"]
	worker.setenv("TF_CONFIG", strings.Replace(worker.getenv("TF_CONFIG"), `"index":1`, `"index":2`, 1))
	out, ok := checkTFConfigs(t, members)
	if ok || !strings.Contains(out, "job-master-0: the coordinator is named 'master'") || !strings.Contains(out, "job-worker-1: task index 2 is out of range") {
		t.Errorf("the check did not refuse the broken TF_CONFIGs:\n%s", out)
	}
}
