package main

import (
	"fmt"
	"os"

	"github.com/luacoll/luacoll/engine/plan/cost"
)

// loadModel reads a cost model (--model FILE); "" is none (nil).
func loadModel(path string) (*cost.Model, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	m, err := cost.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("--model %s: %w", path, err)
	}
	return m, nil
}
