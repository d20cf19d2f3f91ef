package main

import "github.com/spf13/cobra"

func newCatalogCmd() *cobra.Command { return &cobra.Command{Use: "catalog"} }
