print("mediafs")
