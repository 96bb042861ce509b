package main

// The tests write into fixture roots (--root DIR, its sysfs the kernel
// simulator) as gpuprep writes into /; gpuprep itself refuses that
// (rootRule). Tests of the rule turn it off (withoutFixtureRoots).
func init() { fixtureRoots = true }

// withoutFixtureRoots are the deps gpuprep itself runs with.
func withoutFixtureRoots() *deps {
	d := realDeps()
	d.fixtureRootsWritable = false
	return d
}
