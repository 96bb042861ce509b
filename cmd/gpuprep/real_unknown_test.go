package main

import "slices"

// unreadOnSnapshot turns, in a live run's verdicts, the fails of check into
// the errors a snapshot gives: the real node had no /lib/modules for its
// kernel, which the live run (reading the node itself) rightly failed;
// a snapshot lacking the tree cannot tell that from a capture that left it
// out, so vfio.modules there says it cannot decide (it is not evaluated
// in the modes, not a blocker).
func unreadOnSnapshot(top map[string]any, want []verdict, check string) {
	for i := range want {
		if want[i].Check == check && want[i].Status == "fail" {
			want[i].Status = "error"
		}
	}
	modes, _ := top["modes"].(map[string]any)
	for _, m := range modes {
		mode, _ := m.(map[string]any)
		blockers, _ := mode["blockers"].([]any)
		i := slices.Index(blockers, any(check))
		if i < 0 {
			continue
		}
		mode["blockers"] = slices.Delete(slices.Clone(blockers), i, i+1)
		unknown, _ := mode["unknown"].([]any)
		mode["unknown"] = append(unknown, check)
	}
}

// nouveauUnreadOnSnapshot: the live run's driver.nouveau passed where
// nouveau was not loaded; check now also judges whether the next boot
// loads it, from the next kernel's /lib/modules/RELEASE, which these
// snapshots do not hold (nor is the root known to be the node's, where a
// missing tree would mean no module can load): that cannot be told, a warn.
func nouveauUnreadOnSnapshot(want []verdict) {
	for i := range want {
		if want[i].Check == "driver.nouveau" && want[i].Status == "pass" {
			want[i].Status = "warn"
		}
	}
}
