print("strict lint")
