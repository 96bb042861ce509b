package rollout

import "github.com/gpuprep/gpuprep/report"

// gpuprep's exit codes (README, "Exit codes"): what apply and rollback
// answer with on a host, and what fleet apply ends with.
const (
	ExitOK         = 0
	ExitNotReady   = 1
	ExitUsage      = 2
	ExitUnknown    = 3
	ExitNeedReboot = 4
)

// ExitCode is fleet apply's exit code for its report: 1 a host failed,
// else 3 interrupted, else 4 a host needs a reboot (or a rollout stopped
// on one), else 0.
func ExitCode(f *report.FleetReport) int {
	n := f.Summary.Outcomes // the hosts' outcomes, counted as they were added
	switch {
	case f.Rollout.Failures > 0:
		return ExitNotReady
	case f.Interrupted || n[report.OutcomeCancelled] > 0:
		return ExitUnknown
	case n[report.OutcomeRebootNeeded] > 0:
		return ExitNeedReboot
	case n[report.OutcomeSkipped] > 0: // cannot happen without one of the above
		return ExitNotReady
	}
	return ExitOK
}
