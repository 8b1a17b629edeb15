-- tools/check-includes: csrc/ in folders by layer (base, verbs, process,
-- datapath, cm, measure, net; core.c, embed.c and ibverbs.h at the top), every
-- include down the folders' order, no cycle among the areas, each header
-- compiling alone; and the check itself fails, naming the file, on a copy
-- of csrc/ with a file in the wrong room or an include against the order.
local support = require "support"

local sh = support.capture

local function tmpdir()
  return support.lines_of("mktemp -d /tmp/ibvl-includes.XXXXXX")[1]
end

local function append(path, text)
  local f = assert(io.open(path, "a"))
  f:write(text)
  f:close()
end

describe("tools/check-includes", function()
  it("passes the tree: its folders' order, no cycle, every header alone", function()
    local out, rc = sh("tools/check-includes")
    assert.equal(0, rc, out)
    assert.matches("in 7 folders' order, %d+ areas, no cycle", out)
  end)

  it("lists the areas by layer, named by their folder", function()
    local out, rc = sh("tools/check-includes --list --no-compile")
    assert.equal(0, rc, out)
    assert.matches("layer 0\n", out)
    assert.matches("base/compat%s+compat%.h%s+%-> %(nothing%)", out)
    assert.matches("base/object%s+object%.c object%.h object_class%.c", out)
    assert.matches("cm/cm%s+cm%.h cm_addr%.c", out)
  end)

  describe("on a planted copy of csrc/", function()
    local dir
    before_each(function()
      dir = tmpdir()
      assert(os.execute("cp -r csrc " .. dir .. "/csrc"))
    end)
    after_each(function() os.execute("rm -rf " .. dir) end)

    it("passes the copy as it is", function()
      local out, rc = sh("tools/check-includes --no-compile " .. dir .. "/csrc")
      assert.equal(0, rc, out)
    end)

    it("fails on a file at the top that is not core.c, embed.c or ibverbs.h", function()
      append(dir .. "/csrc/stray.c", "int ibvl_stray;\n")
      local out, rc = sh("tools/check-includes --no-compile " .. dir .. "/csrc")
      assert.equal(1, rc, out)
      assert.matches("csrc/stray%.c: a file at the top", out)
    end)

    it("fails on a file in a folder that is not in the order", function()
      assert(os.execute("mkdir " .. dir .. "/csrc/misc"))
      append(dir .. "/csrc/misc/extra.h", "#define IBVL_EXTRA 1\n")
      local out, rc = sh("tools/check-includes --no-compile " .. dir .. "/csrc")
      assert.equal(1, rc, out)
      assert.matches("csrc/misc/extra%.h: in folder misc", out)
    end)

    it("fails on an include up the order (a base file including a verbs header)", function()
      append(dir .. "/csrc/base/err.c", '#include "verbs/verbs.h"\n')
      local out, rc = sh("tools/check-includes --no-compile " .. dir .. "/csrc")
      assert.equal(1, rc, out)
      assert.matches("csrc/base/err%.c:%d+: includes verbs/verbs%.h: base may include base only", out)
    end)

    it("fails on an include across the order (verbs including the data path)", function()
      append(dir .. "/csrc/verbs/pd.c", '#include "datapath/post.h"\n')
      local out, rc = sh("tools/check-includes --no-compile " .. dir .. "/csrc")
      assert.equal(1, rc, out)
      assert.matches("csrc/verbs/pd%.c:%d+: includes datapath/post%.h: verbs may include verbs, base only", out)
    end)

    it("fails on an include without its folder", function()
      append(dir .. "/csrc/verbs/pd.c", '#include "err.h"\n')
      local out, rc = sh("tools/check-includes --no-compile " .. dir .. "/csrc")
      assert.equal(1, rc, out)
      assert.matches("csrc/verbs/pd%.c:%d+: includes err%.h, no such file", out)
    end)

    it("fails on a cycle among the areas of one folder, printing its circle", function()
      append(dir .. "/csrc/base/err.h", '#include "base/args.h"\n') -- args.c includes err.h
      local out, rc = sh("tools/check-includes --no-compile " .. dir .. "/csrc")
      assert.equal(1, rc, out)
      assert.matches("cycle among the areas", out)
      assert.matches("base/err %-> base/args", out)
    end)

    it("fails on a header that does not compile alone", function()
      append(dir .. "/csrc/verbs/sge.h", "struct ibvl_undeclared_use u;\n")
      local out, rc = sh("tools/check-includes " .. dir .. "/csrc")
      assert.equal(1, rc, out)
      assert.matches("csrc/verbs/sge%.h does not compile alone", out)
    end)
  end)
end)
