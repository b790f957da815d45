module lockscope.test/go_park

go 1.19
