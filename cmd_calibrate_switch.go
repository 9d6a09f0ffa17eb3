package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/plan/cost"
	"github.com/luacoll/luacoll/luabind"
)

// switchSteps is how many exchanges bench/calibrate.lua's switch plans make.
const switchSteps = 50

// calibrateSwitch measures, with ranks that outnumber the CPUs, what a CPU
// takes to pass from one rank to another (bench/calibrate.lua's switch
// plans) and returns the self class of the host model in path with that
// Switch (rank 0; the others return nil).
func calibrateSwitch(ctx context.Context, c *engine.Comm, path string, iters [2]int, cmdline string) (*cost.Model, error) {
	cpus := runtime.NumCPU()
	var base *cost.Model
	if c.Env.Rank == 0 {
		var err error
		base, err = cost.LoadFile(path)
		if err == nil && (base == nil || base.Backend != "host") {
			err = errors.New("no host model there")
		}
		if err == nil {
			if _, ok := base.Modes["host"]["self"]; !ok {
				err = errors.New("its host mode has no self class")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%d ranks on %d CPUs measure only the switch cost, into the host model -o names; make that first with a CPU per rank (luacoll calibrate -n 2 -o %s): %w", c.Size(), cpus, path, err)
		}
	}
	got, err := runCalibration(ctx, c, "host", "-", strconv.Itoa(iters[0]), strconv.Itoa(iters[1]), "switch", strconv.Itoa(cpus))
	if err != nil || got == nil {
		return nil, err
	}
	sw, err := calSwitch(base, got["host"], c.Size(), cpus)
	if err != nil {
		return nil, err
	}
	// The ring plan's steps, fitted alike, say how far the figure holds
	// for another pattern; the note keeps both.
	right := func(r int) int { return (r + 1) % c.Size() }
	left := func(r int) int { return (r - 1 + c.Size()) % c.Size() }
	ring := -1.0
	if t, ok := got["host"]["ring"][switchSteps]; ok {
		if ring, err = cost.FitSwitch(base, cost.ExchangeLists(c.Size(), switchSteps, right, left), cpus, luabind.SteadyReplays, t); err != nil {
			return nil, err
		}
	}
	self := base.Modes["host"]["self"]
	self.Switch = cost.Cost{AlphaNs: sw}
	note := fmt.Sprintf("switch, %d ranks on %d CPUs: %.2f us (the ring plan's steps: %.2f us).", c.Size(), cpus, sw/1e3, ring/1e3)
	if sw == 0 {
		// The model's other costs (measured on a busier machine, say)
		// already account for the time the switch plans took.
		note += " The model with no switch cost predicts the switch plans' time or more: 0 is kept; calibrate -n 2 again on a quiet machine, then this."
	}
	return &cost.Model{Machine: machineName(c), Backend: "host", Made: time.Now().UTC().Format(time.RFC3339), Command: cmdline,
		Note:  note,
		Modes: map[string]map[string]cost.Params{"host": {"self": self}}}, nil
}

// calSwitch is the switch cost from the switch plans' times on ranks
// ranks sharing cpus CPUs: the Switch under which base's estimate of the
// plan of partners on one CPU takes the time it took.
func calSwitch(base *cost.Model, t calTimes, ranks, cpus int) (float64, error) {
	same, ok := t["same"][switchSteps]
	if !ok {
		return 0, fmt.Errorf("bench/calibrate.lua: no same time of %d steps", switchSteps)
	}
	partner := func(r int) int {
		if r%(2*cpus) < cpus {
			return r + cpus
		}
		return r - cpus
	}
	return cost.FitSwitch(base, cost.ExchangeLists(ranks, switchSteps, partner, partner), cpus, luabind.SteadyReplays, same)
}
