-- Says what it was given: arg (name and arguments) and ... (the arguments).
local lc = require("luacoll")
print(("%s on rank %d: arg = {%s}, ... = {%s}"):format(arg[0], lc.rank, table.concat(arg, ", "), table.concat({ ... }, ", ")))
return #arg
