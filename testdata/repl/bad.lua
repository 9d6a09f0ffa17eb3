-- A file with a syntax error on line 2.
local x = 1
x = = 2
