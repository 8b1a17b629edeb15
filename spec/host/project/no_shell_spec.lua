-- No program of lua/ or examples/ goes through a shell from Lua: every Lua
-- file and shell script there is read with its comments stripped, and a call
-- of io.popen or os.execute (io.popen(...), io["popen"], a local popen =
-- io.popen; a string naming one too, which load() could run) fails the spec;
-- programs start through ibv.spawn (an argument vector, posix_spawnp).  The
-- stripping itself is checked on samples: a comment that names them does not
-- count, a call after a string does.
local support = require "support"

-- Lua source without its comments (strings kept: "--" inside one is no comment).
local function strip_lua(src)
  local out, i, n = {}, 1, #src
  while i <= n do
    local c = src:sub(i, i)
    local long = src:match("^%[(=*)%[", i)
    if src:sub(i, i + 1) == "--" then
      local eq = src:match("^%-%-%[(=*)%[", i)
      if eq then
        local _, e = src:find("]" .. eq .. "]", i, true)
        i = (e or n) + 1
      else
        local e = src:find("\n", i, true)
        i = e or n + 1
      end
    elseif long then
      local _, e = src:find("]" .. long .. "]", i, true)
      out[#out + 1] = src:sub(i, e or n)
      i = (e or n) + 1
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n do
        local d = src:sub(j, j)
        if d == "\\" then j = j + 1 elseif d == c or d == "\n" then break end
        j = j + 1
      end
      out[#out + 1] = src:sub(i, j)
      i = j + 1
    else
      out[#out + 1] = c
      i = i + 1
    end
  end
  return table.concat(out)
end

-- A shell script without its comments: '#' at the start of a word to the end
-- of the line (not $#, ${#x}, or one inside quotes on that line).
local function strip_sh(src)
  local lines = {}
  for line in (src .. "\n"):gmatch("([^\n]*)\n") do
    local quote, cut = nil, nil
    for k = 1, #line do
      local c = line:sub(k, k)
      if quote then
        if c == quote then quote = nil end
      elseif c == "'" or c == '"' then
        quote = c
      elseif c == "#" and (k == 1 or line:sub(k - 1, k - 1):match("%s")) then
        cut = k
        break
      end
    end
    lines[#lines + 1] = cut and line:sub(1, cut - 1) or line
  end
  return table.concat(lines, "\n")
end

local PATTERNS = { "io%s*%.%s*popen", "os%s*%.%s*execute", "io%s*%[%s*[\"']popen[\"']%s*%]",
  "os%s*%[%s*[\"']execute[\"']%s*%]" }

-- "file:line: text" of each call in src (already stripped)
local function calls(name, src)
  local found = {}
  local lineno = 0
  for line in (src .. "\n"):gmatch("([^\n]*)\n") do
    lineno = lineno + 1
    for _, p in ipairs(PATTERNS) do
      if line:find(p) then found[#found + 1] = name .. ":" .. lineno .. ": " .. line:gsub("^%s+", "") end
    end
  end
  return found
end

local function kind(path, text)
  local shebang = text:match("^#![^\n]*") or ""
  if path:match("%.lua$") or shebang:match("lua") then return "lua" end
  if path:match("%.sh$") or path:match("%.sbatch$") or shebang:match("sh%f[%W]") then return "sh" end
end

describe("no shell from the Lua code (lua/, examples/)", function()
  it("strips comments, not code", function()
    assert.same({}, calls("x", strip_lua("-- io.popen(cmd) was here\n--[[ os.execute('x') ]] local a = 1\n"
      .. "--[==[\nio.popen\n]==]\nlocal s = 'gone' -- io.popen")))
    -- a string naming one counts: load() could run it
    assert.equal(1, #calls("x", strip_lua("local s = 'io.popen(\"ls\")'")))
    assert.equal(1, #calls("x", strip_lua('local s = "--" .. tostring(io.popen("ls"))')))
    assert.equal(1, #calls("x", strip_lua("local s = [[--]] os.execute('ls')")))
    assert.equal(1, #calls("x", strip_lua("local popen = io .popen")))
    assert.equal(1, #calls("x", strip_lua("local p = io['popen']")))
    assert.same({}, calls("x", strip_sh("#!/bin/sh\n# io.popen\necho $# # os.execute\n")))
    assert.equal(1, #calls("x", strip_sh("lua -e 'os.execute(\"ls # x\")'\n")))
    assert.equal(1, #calls("x", strip_sh("echo \"# not a comment\"; lua -e 'io.popen(\"x\")'")))
  end)

  it("finds no io.popen nor os.execute call in any Lua file or shell script there", function()
    local found, seen = {}, { lua = 0, sh = 0 }
    for _, path in ipairs(support.lines_of("find lua examples -type f | sort")) do
      local text = support.slurp(path)
      local k = kind(path, text)
      if k then
        seen[k] = seen[k] + 1
        for _, c in ipairs(calls(path, k == "lua" and strip_lua(text) or strip_sh(text))) do
          found[#found + 1] = c
        end
      end
    end
    assert.is_true(seen.lua > 40, seen.lua .. " Lua files")
    assert.is_true(seen.sh >= 2, seen.sh .. " shell scripts")
    assert.same({}, found)
  end)
end)
