module github.com/luacoll/luacoll

go 1.26.0

require (
	github.com/NVIDIA/go-nvml v0.13.3-1
	github.com/ergochat/readline v0.1.3
	github.com/yuin/gopher-lua v1.1.2
	golang.org/x/image v0.47.0
	golang.org/x/sys v0.49.0
	golang.org/x/term v0.47.0
)

require golang.org/x/text v0.43.0 // indirect
