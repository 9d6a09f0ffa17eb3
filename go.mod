module github.com/luacoll/luacoll

go 1.26.0

require (
	github.com/NVIDIA/go-nvml v0.13.3-1
	github.com/ergochat/readline v0.1.3
	github.com/yuin/gopher-lua v1.1.2
	golang.org/x/sys v0.15.0
)

require golang.org/x/text v0.9.0 // indirect
